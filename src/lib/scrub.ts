import { CoveredRuns } from "./covered-runs";
import { START, type SecretMatcher } from "./secret-matcher";
import { headOf } from "./text";

/** What a stretch of text a secret covered reads as. */
export const REDACTED = "[redacted]";

/**
 * Where a text was cut short before it was scrubbed: its ends are not the sender's, so a secret may run past them and
 * only part of it be there to be recognised.
 */
export interface TextCut {
  /** The text starts inside what was sent (a window the JSON parser quotes): a head that could end a secret is left out. */
  head?: boolean;
  /** The text ends inside what was sent (an error body's first bytes): a tail that could start a secret is left out. */
  tail?: boolean;
}

/** A text as its sender ended it at both ends: one object, so a call that names no cut allocates none. */
const WHOLE: TextCut = Object.freeze({});

/**
 * `text` with every stretch that secrets cover, as sent, replaced by one `[redacted]` (overlapping or touching matches
 * as one): found in one pass over the text, never in what a replacement put there, so a short secret takes apart
 * neither the `[redacted]` of a longer one nor the head of one cut short. Linear in `text` (a search of it per secret,
 * then one step per unit from the first secret on); returns `text` itself, having allocated nothing, when no secret is
 * in it and nothing is cut.
 */
export function scrub(text: string, matcher: SecretMatcher, cut: TextCut = WHOLE): string {
  if (!matcher.longest) return text;
  // Nothing before the first secret, nor before the last units a cut may hold, is read unit by unit.
  const first = matcher.firstAt(text);
  const found = first >= 0 ? first : text.length;
  const readFrom = cut.tail ? Math.min(found, Math.max(0, text.length - matcher.longest)) : found;
  let runs: CoveredRuns | undefined;
  let node = START;
  for (let i = readFrom; i < text.length; i++) {
    node = matcher.step(node, text.charCodeAt(i));
    const length = matcher.matchedAt(node);
    if (length) (runs ??= new CoveredRuns()).add(i + 1 - length, i + 1);
  }
  // What was read last and what comes first may be part of a secret whose rest was never read: left out.
  const to = text.length - (cut.tail ? matcher.heldAt(node) : 0);
  const from = cut.head ? matcher.heldAtStart(text) : 0;
  if (from >= to || (cut.head && cut.tail && matcher.within(text))) return "";
  if (!runs) return from === 0 && to === text.length ? text : text.slice(from, to);
  const parts: string[] = [];
  let shownFrom = from;
  while (runs.size) {
    const [start, end] = runs.shift();
    if (end <= from) continue;
    if (start >= to) break;
    if (start > shownFrom) parts.push(text.slice(shownFrom, start));
    parts.push(REDACTED);
    shownFrom = end;
  }
  if (shownFrom < to) parts.push(text.slice(shownFrom, to));
  return parts.join("");
}

/**
 * The first `max` characters of `text` as `scrub` gives them, reading only its head: `max` units and the longest
 * secret's length past them, the rest taken as cut off. A megabyte quoted for its first 80 characters costs no more
 * than those; a secret that runs past the head read is left out, as one an error body's read cut short is.
 */
export function scrubbedHead(text: string, matcher: SecretMatcher, max: number, cut: TextCut = {}): string {
  const head = headOf(text, max + matcher.longest);
  return headOf(scrub(head, matcher, { head: cut.head, tail: cut.tail || head.length < text.length }), max);
}
