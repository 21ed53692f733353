/** How much of another party's words (an upstream's error, a platform's answer) a log line keeps. */
export const LOGGED_TEXT_CHARS = 300;

/**
 * Control characters (C0, DEL, C1, the Unicode line and paragraph separators), the bidirectional controls (an
 * override shows the text after it reversed, beyond the words it is in where they are shown in a line of more), the
 * zero-width characters (which hide where they are: an id that reads as another), and the backslash that escapes them.
 */
const UNSHOWN = /[\\\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u202a-\u202e\u2028\u2029\u2060\u2066-\u2069\ufeff]/g;
const NAMED: Record<string, string> = { "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t" };
const escapeOne = (c: string) => NAMED[c] ?? `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`;
const ONE_UNSHOWN = new RegExp(UNSHOWN.source);
const isHighSurrogate = (c: number) => c >= 0xd800 && c <= 0xdbff;
const isLowSurrogate = (c: number) => c >= 0xdc00 && c <= 0xdfff;

/**
 * Text as one line: each control character written as its JSON escape (`\n`, `\u001b`, `\u202e`), quotes left as
 * they are, so a traceback or a JSON reason reads as sent, and no terminal escape, line break or reordering of
 * another party's words acts where they are shown.
 */
export function escapedLine(text: string): string {
  return text.replace(UNSHOWN, escapeOne);
}

/**
 * The start of `text` escaped (escapedLine) in at most `max` characters as written, never cutting an escape or a
 * surrogate pair in two: escaping can make text six times longer (`\u0001`), so the cut is counted after it. `cut`:
 * some of the text was left out.
 */
export function escapedHead(text: string, max: number): { text: string; cut: boolean } {
  let shown = "";
  let i = 0;
  // Each step adds at least one character: at most `max` steps, whatever the text's length.
  while (i < text.length) {
    const pair = isHighSurrogate(text.charCodeAt(i)) && isLowSurrogate(text.charCodeAt(i + 1));
    const piece = pair ? text.slice(i, i + 2) : ONE_UNSHOWN.test(text[i]!) ? escapeOne(text[i]!) : text[i]!;
    if (shown.length + piece.length > max) break;
    shown += piece;
    i += pair ? 2 : 1;
  }
  return { text: shown, cut: i < text.length };
}

/**
 * Text the host did not write (an upstream's or a platform's words, a name a runner sent) as a log line quotes it:
 * escaped (escapedLine), so a line break in it never starts a line of its own that reads as the host's (nor a
 * terminal escape acts), and cut to `max` characters as written.
 */
export function loggedText(text: string, max = LOGGED_TEXT_CHARS): string {
  const head = escapedHead(text, max);
  return head.cut ? `${head.text}…` : head.text;
}

/** Characters of an id a log line keeps: as long as a scope id may be (ScopedIdSchema). */
export const LOGGED_ID_CHARS = 200;

/**
 * An id another party chose (a platform's chat, channel, thread or message id as its webhook sent it, an event id) as
 * a log line names it: escaped and cut (loggedText), so a crafted one never forges a line of its own.
 */
export const loggedId = (id: string | number): string => loggedText(String(id), LOGGED_ID_CHARS);
