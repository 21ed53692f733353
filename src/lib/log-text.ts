import { headOf } from "./text";

/** How much of another party's words (an upstream's error, a platform's answer) a log line keeps. */
export const LOGGED_TEXT_CHARS = 300;

/**
 * Control characters (C0, DEL, C1, the Unicode line and paragraph separators), the bidirectional controls (an
 * override shows the text after it reversed, beyond the words it is in where they are shown in a line of more),
 * and the backslash that escapes them.
 */
const UNSHOWN = /[\\\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2028\u2029\u2066-\u2069]/g;
const NAMED: Record<string, string> = { "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t" };

/**
 * Text as one line: each control character written as its JSON escape (`\n`, `\u001b`, `\u202e`), quotes left as
 * they are, so a traceback or a JSON reason reads as sent, and no terminal escape, line break or reordering of
 * another party's words acts where they are shown.
 */
export function escapedLine(text: string): string {
  return text.replace(UNSHOWN, (c) => NAMED[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/**
 * Text the host did not write (an upstream's or a platform's words, a name a runner sent) as a log line quotes it:
 * escaped (escapedLine), so a line break in it never starts a line of its own that reads as the host's (nor a
 * terminal escape acts), and cut to `max` characters.
 */
export function loggedText(text: string, max = LOGGED_TEXT_CHARS): string {
  return escapedLine(text.length > max ? `${headOf(text, max)}…` : text);
}
