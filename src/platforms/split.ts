/**
 * Split a reply into parts of at most `max` UTF-16 code units, the unit
 * platforms count in, as the platform gets them (`sentUnits`: what a code
 * unit becomes once the messenger escapes it). A part ends at the last line
 * break, else the last space, in its second half; otherwise it is cut hard, never inside a
 * surrogate pair. A part that ends inside a Markdown code fence closes it,
 * and the next part opens it again (with its language), so a long code
 * block renders as code in every part; a block that only touches a cut is
 * not split into an empty one. A last part still inside a block (a draft's)
 * leaves room for the closing fence its messenger shows (Slack's mrkdwn adds
 * it). Deterministic, so a growing stream splits the same way every time and
 * the parts already sent stay stable (once the line after their cut has arrived).
 */
export function splitMessage(text: string, max: number, sentUnits: (charCode: number) => number = oneUnit): string[] {
  if (max < 2) throw new Error("max message size must be at least 2");
  // Room for a fence's closing line and its reopening; text without fences is split exactly as before.
  const fenced = text.includes(FENCE) && max > 2 * FENCE_OVERHEAD + 8;
  const parts: string[] = [];
  let rest = text;
  let open: string | null = null; // the fence opener the next part starts inside of, if any
  for (;;) {
    const prefix = open === null ? "" : `${open}\n`;
    const room = max - sizeAsSent(prefix, sentUnits);
    // A code unit takes at least one unit as sent: a rest longer than the room never fits (and is not measured whole).
    if (rest.length <= room && sizeAsSent(rest, sentUnits) + (fenced ? closingRoom(rest, open) : 0) <= room) break;
    const budget = fitting(rest, room - (fenced ? CLOSER.length + 1 : 0), sentUnits);
    const cut = fenced ? clearOfFences(rest, cutPoint(rest, budget), open, fitting(rest, room, sentUnits)) : cutPoint(rest, budget);
    const piece = rest.slice(0, cut);
    const inside: string | null = fenced ? fenceAfter(piece, open) : null;
    parts.push(prefix + piece + (inside === null ? "" : `${piece.endsWith("\n") ? "" : "\n"}${CLOSER}`));
    open = inside;
    rest = rest.slice(cut);
  }
  if (rest.length || parts.length === 0) parts.push((open === null ? "" : `${open}\n`) + rest);
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
const CLOSER = "```";
const FENCE_LINE = /^ {0,3}```/;
/** A code block written on one line (```npm ci```): it closes itself, and nothing after it is code. */
const ONE_LINE_BLOCK = /^ {0,3}```+[^`]+```+$/;

/** A line that opens or closes a code block, as the split counts them. */
const isFenceLine = (line: string) => FENCE_LINE.test(line) && !ONE_LINE_BLOCK.test(line.trimEnd());

/**
 * What closing a last part still inside a code block adds: its closing fence, on a line of its own (a fence line
 * ending the text closes or opens as any other). Never more than the closing line the finished text brings, so a
 * draft cut for it stays cut as it grows.
 */
function closingRoom(rest: string, open: string | null): number {
  const ended = rest.endsWith("\n");
  return fenceAfter(ended ? rest : `${rest}\n`, open) === null ? 0 : ended ? CLOSER.length : CLOSER.length + 1;
}
/** The most a split adds around a part: a closing fence line, and a reopening line with a short language tag. */
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
 * A cut moved so that a code block that merely touches it does not become an empty block of its own: a closing
 * fence line just after the cut joins the part when it fits in `room` (instead of a closer added, and the block
 * reopened only to be closed), and an opening fence line just before it moves to the next part.
 */
function clearOfFences(rest: string, cut: number, openBefore: string | null, room: number): number {
  const piece = rest.slice(0, cut);
  if (!piece.endsWith("\n") || fenceAfter(piece, openBefore) === null) return cut;
  const end = rest.indexOf("\n", cut);
  const next = rest.slice(cut, end < 0 ? rest.length : end + 1);
  if (isFenceLine(next) && cut + next.length <= room) return cut + next.length;
  const lastLine = piece.lastIndexOf("\n", piece.length - 2) + 1;
  const openedByLastLine = isFenceLine(piece.slice(lastLine)) && fenceAfter(piece.slice(0, lastLine), openBefore) === null;
  return openedByLastLine && lastLine > 0 ? lastLine : cut;
}

/** The fence opener (e.g. "```ts") still open after `piece`, given the one open before it, or null. */
function fenceAfter(piece: string, openBefore: string | null): string | null {
  let open = openBefore;
  let lineStart = 0;
  for (;;) {
    const end = piece.indexOf("\n", lineStart);
    // A line cut off at the part's end is not a fence line yet.
    if (end < 0) return open;
    const line = piece.slice(lineStart, end).trimEnd();
    // A fence line may be indented up to three spaces (a code block in a list item), as CommonMark has it.
    // The opener is kept short, with its indent; a cut inside a surrogate pair drops its half.
    const fence = isFenceLine(line) ? FENCE_LINE.exec(line) : null;
    if (fence) open = open === null ? line.slice(0, fence[0].length + 12).replace(/[\ud800-\udbff]$/, "") : null;
    lineStart = end + 1;
  }
}
