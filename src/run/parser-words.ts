import type { QuoteScrub } from "./sent-secrets";

/**
 * The parser's words that quote none of the text: where it stopped, by position, or that the text ended early. Not an
 * older V8's "Unexpected token X in JSON at position N" (Node 18's): X is the line's own character, unquoted.
 */
const PLAIN = /^(?:Unexpected end of JSON input|(?!Unexpected token )[A-Za-z ,:'{}[\]-]+ JSON at position \d+(?: \(line \d+ column \d+\))?)$/;
/**
 * The parser's words that quote the text (V8's): the unit it stopped at, and a window of the text around it, "..."
 * marking an end where the window was cut from the text (some 10 units either side, or the whole of a short text).
 */
const QUOTING = /^(?:Unexpected token '([\s\S])', )?(\.\.\.)?"([\s\S]*)"(\.\.\.)? is not valid JSON$/;
/** A window longer than V8's is not one of its windows: its words are not quoted. */
const MAX_WINDOW = 40;

/**
 * Why JSON.parse refused a runner's line, in the parser's words about the line as sent, with what they quote of it
 * scrubbed: the window (a piece cut from the line at each end marked "...", so a secret running past one is left out
 * there), and the unit it stopped at only when nothing in the window was taken out (it is one of the window's). Words
 * of another shape say no more than "not valid JSON".
 */
export function parserWords(err: unknown, scrub: QuoteScrub): string {
  const message = err instanceof Error ? err.message : String(err);
  if (PLAIN.test(message)) return message;
  const quoting = QUOTING.exec(message);
  if (!quoting || quoting[3].length > MAX_WINDOW) return "not valid JSON";
  const [, token, lead = "", window, trail = ""] = quoting;
  const shown = scrub(window, { head: lead !== "", tail: trail !== "" });
  const stoppedAt = token === undefined ? "" : shown === window ? `Unexpected token '${token}', ` : "Unexpected token, ";
  return `${stoppedAt}${lead}"${shown}"${trail} is not valid JSON`;
}
