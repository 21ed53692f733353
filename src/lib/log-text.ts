import { headOf } from "./text";

/** How much of another party's words (an upstream's error, a platform's answer) a log line keeps. */
export const LOGGED_TEXT_CHARS = 300;

/**
 * Text the host did not write (an upstream's or a platform's words, a name a runner sent) as a log line quotes it:
 * JSON-escaped, so a line break in it never starts a line of its own that reads as the host's (nor a terminal escape
 * acts), and cut to `max` characters.
 */
export function loggedText(text: string, max = LOGGED_TEXT_CHARS): string {
  const cut = text.length > max ? `${headOf(text, max)}…` : text;
  // JSON.stringify leaves these as they are; some viewers break lines at them.
  return JSON.stringify(cut).slice(1, -1).replace(/[\u0085\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}
