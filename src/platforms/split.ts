import { fenceLine, isFenceLine, lineBefore, openAfter, reopened, type OpenFence } from "./split-fences";
import { clearOfTableHeads, tableInside } from "./split-tables";

/**
 * Split a reply into parts of at most `max` UTF-16 code units, the unit
 * platforms count in, as the platform gets them (`sentUnits`: what a code
 * unit becomes once the messenger escapes it). A part ends at the last line
 * break, else the last space, in its second half; otherwise it is cut hard, never inside a
 * surrogate pair. A part that ends inside a Markdown code block closes it,
 * and the next part opens it again (with its language), so a long code
 * block renders as code in every part; a block that only touches a cut is
 * not split into an empty one. Fences are read as the renderers read them
 * (./split-fences.ts), so each part is code exactly where the whole is. A last
 * part still inside a block (a draft's) leaves room for the closing fence its
 * messenger shows (Slack's mrkdwn adds it). A table cut by a part has its header repeated at the next one's start, in
 * or out of a code block (./split-tables.ts). Deterministic, so a growing stream splits the same way every time and
 * the parts already sent stay stable (once the line after their cut has arrived).
 */
export function splitMessage(text: string, max: number, sentUnits: (charCode: number) => number = oneUnit): string[] {
  if (max < 2) throw new Error("max message size must be at least 2");
  // Room for a fence's closing line and its reopening; text without fences is split exactly as before.
  const fenced = text.includes(FENCE) && max > 2 * FENCE_OVERHEAD + 8;
  // A table cut by a part has its header repeated in the next (./split-tables.ts): only looked for where one may be.
  const tabled = /[|─]/.test(text);
  const parts: string[] = [];
  let rest = text;
  let open: OpenFence | null = null; // the block the next part starts inside of, as it reopens it, if any
  let head = ""; // the header of a table the next part starts inside of, repeated at its start (after its block's fence)
  for (;;) {
    const prefix = (open === null ? "" : `${fenceLine(open)}\n`) + head;
    const room = max - sizeAsSent(prefix, sentUnits);
    // A code unit takes at least one unit as sent: a rest longer than the room never fits (and is not measured whole).
    if (rest.length <= room && sizeAsSent(rest, sentUnits) + (fenced ? closingRoom(rest, open) : 0) <= room) break;
    let cut = fenced ? fencedCut(rest, open, room, sentUnits) : cutPoint(rest, fitting(rest, room, sentUnits));
    if (tabled) cut = clearOfTableHeads(rest, cut, open, fenced ? openAfter(rest.slice(0, cut), open) : null, head);
    const piece = rest.slice(0, cut);
    const inside: OpenFence | null = fenced ? openAfter(piece, open) : null;
    // Closed with as many backticks as it was opened with: fewer would not close it.
    parts.push(prefix + piece + (inside === null ? "" : `${piece.endsWith("\n") ? "" : "\n"}${inside.marker}`));
    const table = tabled ? tableInside(piece, rest.slice(cut), open, head) : null;
    open = inside && reopened(inside, max);
    // A header too long to repeat (more than a quarter of a part) is not; nor one in a block the part does not reopen.
    head = table && (!table.inCode || inside !== null) && sizeAsSent(table.head, sentUnits) <= max / 4 ? table.head : "";
    rest = rest.slice(cut);
  }
  if (rest.length || parts.length === 0) parts.push((open === null ? "" : `${fenceLine(open)}\n`) + head + rest);
  return parts;
}

/** The last message of a reply cut at DELIVERY_MAX_PARTS. */
export const REPLY_CUT_NOTICE = "(The answer goes on, but is too long for this chat: the rest was cut.)";

/**
 * A reply's messages: `splitMessage`'s parts, at most `maxParts` of them; past that the last says the rest was cut, so
 * a runaway answer (a runner's reply of megabytes) never floods the chat with hundreds of messages. Only the text's
 * start is split, so its cost does not grow with the reply (a streamed draft is split again at each edit).
 */
export function splitReply(text: string, max: number, maxParts: number, sentUnits?: (charCode: number) => number): string[] {
  // Every part but the last takes at most `max` units: so many more than maxParts parts need, and suffice to tell.
  const head = text.length > (maxParts + 1) * max ? text.slice(0, (maxParts + 1) * max) : text;
  const parts = splitMessage(head, max, sentUnits);
  return parts.length <= maxParts ? parts : [...parts.slice(0, maxParts - 1), REPLY_CUT_NOTICE];
}

/**
 * A draft grown by `more`, up to what `splitReply` reads of it: the text past its first (maxParts + 1) × max units is
 * never shown, so a runner streaming megabytes of deltas leaves no more than that in memory (RUNNER_MAX_STREAM_BYTES
 * is per run, the conversation object's memory is shared).
 */
export function grownDraft(text: string, more: string, max: number, maxParts: number): string {
  const room = (maxParts + 1) * max + 1 - text.length;
  return room <= 0 ? text : text + (more.length > room ? more.slice(0, room) : more);
}

const oneUnit = () => 1;

/** A text's size as the platform gets it. */
function sizeAsSent(text: string, sentUnits: (charCode: number) => number): number {
  if (sentUnits === oneUnit) return text.length;
  let size = 0;
  for (let i = 0; i < text.length; i++) size += sentUnits(text.charCodeAt(i));
  return size;
}

/** How many code units from the text's start take at most `budget` as sent (at least one: a split always moves on). */
function fitting(text: string, budget: number, sentUnits: (charCode: number) => number): number {
  if (sentUnits === oneUnit) return budget;
  let used = 0;
  for (let i = 0; i < text.length; i++) {
    used += sentUnits(text.charCodeAt(i));
    if (used > budget) return Math.max(1, i);
  }
  return text.length;
}

const FENCE = "```";
/** The closing line a messenger adds to a block still open (Slack's mrkdwn always closes with three backticks). */
const CLOSER = "```";

/**
 * What closing a last part still inside a code block adds: its closing fence, on a line of its own (a fence line
 * ending the text closes or opens as any other). Never more than the closing line the finished text brings, so a
 * draft cut for it stays cut as it grows.
 */
function closingRoom(rest: string, open: OpenFence | null): number {
  return openAfter(rest, open) === null ? 0 : rest.endsWith("\n") ? CLOSER.length : CLOSER.length + 1;
}
/**
 * What a split adds around a part for a ``` block: a closing fence line, and a reopening line with a short language
 * tag (more for a longer fence, up to half a part: ./split-fences.ts). Below twice that, fences are not looked at.
 */
const FENCE_OVERHEAD = 20;

function cutPoint(rest: string, budget: number): number {
  const window = rest.slice(0, budget);
  let cut = window.lastIndexOf("\n");
  if (cut < budget / 2) cut = window.lastIndexOf(" ");
  if (cut >= budget / 2) return cut + 1; // the separator stays with the part before it
  return graphemeBoundaryAtOrBefore(rest, budget);
}

/** Code units looked back from a hard cut for the start of the character it falls in. */
const GRAPHEME_LOOKBACK = 64;
let graphemes: Intl.Segmenter | undefined;

/**
 * A hard cut moved back to the start of the user-perceived character it falls
 * in, so a skin tone, a flag or a joined emoji is never shown in halves. A
 * character longer than the lookback is cut between code points, never
 * inside a surrogate pair.
 */
function graphemeBoundaryAtOrBefore(text: string, cut: number): number {
  if (cut >= text.length) return cut;
  const from = Math.max(0, cut - GRAPHEME_LOOKBACK);
  graphemes ??= new Intl.Segmenter(undefined, { granularity: "grapheme" });
  let boundary = from;
  for (const { index } of graphemes.segment(text.slice(from, cut + GRAPHEME_LOOKBACK))) {
    if (from + index > cut) break;
    boundary = from + index;
  }
  // The window's own start is no evidence of a boundary (it may fall inside a character).
  if (boundary > from) return boundary;
  const code = text.charCodeAt(cut - 1);
  return code >= 0xd800 && code <= 0xdbff ? cut - 1 : cut; // a high surrogate never ends a part
}

/**
 * Where a part of a text with fences ends: as cutPoint has it, moved clear of fences (safeCut, clearOfFences), with
 * room kept for the line closing a block open at the cut, as long as its opening fence (never less than a ``` one's,
 * as before, so ``` blocks split where they did).
 */
function fencedCut(rest: string, open: OpenFence | null, room: number, sentUnits: (charCode: number) => number): number {
  const all = fitting(rest, room, sentUnits);
  for (let reserve = CLOSER.length + 1; ; ) {
    const budget = fitting(rest, room - reserve, sentUnits);
    const cut = clearOfFences(rest, safeCut(rest, cutPoint(rest, budget), open, budget), open, all);
    const inside = openAfter(rest.slice(0, cut), open);
    // A longer fence at the cut asks for a smaller part; the reserve only grows, and is at most what the part holds.
    if (inside === null || inside.marker.length + 1 <= reserve) return cut;
    reserve = inside.marker.length + 1;
  }
}

/**
 * A cut inside a line moved where neither half reads as a fence on a line of its own in its part, unless the line is
 * one: else a prose line "then write ```py" cut before its ```py would open a block in the next part, and a fence line
 * cut in two would open or close one where the whole does not. To an earlier space in the part's second half, else the
 * line's start, else (a line longer than the part, at its start) within the line.
 */
function safeCut(rest: string, cut: number, open: OpenFence | null, budget: number): number {
  const start = rest.lastIndexOf("\n", cut - 1) + 1;
  if (start === cut) return cut;
  const newline = rest.indexOf("\n", cut);
  const line = newline < 0 ? rest.slice(start) : lineBefore(rest, start, newline);
  const state = openAfter(rest.slice(0, start), open);
  if (isFenceLine(line, state)) return start > 0 ? start : cut;
  const plainAt = (at: number) => at > 0 && !isFenceLine(line.slice(0, at), state) && !isFenceLine(line.slice(at), state);
  if (plainAt(cut - start)) return cut;
  // A first half that reads as a fence reads so cut at any earlier space too (past its backticks): no space will do.
  if (!isFenceLine(line.slice(0, cut - start), state)) {
    for (let at = line.lastIndexOf(" ", cut - start - 2); at >= 0 && start + at + 1 >= budget / 2; at = at > 0 ? line.lastIndexOf(" ", at - 1) : -1) {
      if (plainAt(at + 1)) return start + at + 1;
    }
  }
  if (start > 0) return start;
  // Before the spaces and backticks that begin the second half and the character before them, else within the first
  // half's leading backticks (fewer than a fence has).
  let before = cut;
  while (before > 0 && (line[before - 1] === " " || line[before - 1] === "`")) before--;
  const fewer = line.indexOf("`") + (state === null ? 3 : state.marker.length) - 1;
  for (const at of [before > 0 ? graphemeBoundaryAtOrBefore(line, before - 1) : 0, fewer]) if (at < cut && plainAt(at)) return at;
  return cut;
}

/**
 * A cut moved so that a code block that merely touches it does not become an empty block of its own: a closing
 * fence line just after the cut joins the part when it fits in `room` (instead of a closer added, and the block
 * reopened only to be closed), and an opening fence line just before it moves to the next part.
 */
function clearOfFences(rest: string, cut: number, openBefore: OpenFence | null, room: number): number {
  const piece = rest.slice(0, cut);
  const inside = openAfter(piece, openBefore);
  if (!piece.endsWith("\n") || inside === null) return cut;
  const end = rest.indexOf("\n", cut);
  const next = end < 0 ? rest.slice(cut) : lineBefore(rest, cut, end);
  const through = end < 0 ? rest.length : end + 1;
  if (isFenceLine(next, inside) && through <= room) return through;
  const lastLine = piece.lastIndexOf("\n", piece.length - 2) + 1;
  const openedByLastLine = openAfter(piece.slice(0, lastLine), openBefore) === null;
  return openedByLastLine && lastLine > 0 ? lastLine : cut;
}
