/**
 * Code fences as ./split.ts reads them: by the rules of ./markdown/blocks.ts, the parser every renderer uses (backticks
 * only, a closing fence at least as long as the opening one), applied to a part as it is sent. So a part the split
 * takes to end inside a block is one its renderer reads so too, and the fence it adds closes that block.
 */
import { closesFence, fenceOpening } from "./markdown/blocks";

/** The code block open at a point: its opening fence's indentation, backticks and info string (the language). */
export interface OpenFence {
  indent: string;
  marker: string;
  info: string;
}

/** Whether a line opens a block (none open) or closes the open one. */
export function isFenceLine(line: string, open: OpenFence | null): boolean {
  return open === null ? fenceOpening(line) !== null : closesFence(line, open.marker.length);
}

/** The block open after `text`, given the one open before it; its last line counts whole or not, as a part ending in it reads. */
export function openAfter(text: string, open: OpenFence | null): OpenFence | null {
  let state = open;
  for (let start = 0; start < text.length; ) {
    const end = text.indexOf("\n", start);
    const line = end < 0 ? text.slice(start) : lineBefore(text, start, end);
    if (state === null) state = fenceOpening(line);
    else if (closesFence(line, state.marker.length)) state = null;
    if (end < 0) break;
    start = end + 1;
  }
  return state;
}

/** The line from `start` to the line break at `end`, less a carriage return before it (the parser splits at \r?\n). */
export const lineBefore = (text: string, start: number, end: number) => text.slice(start, end > start && text[end - 1] === "\r" ? end - 1 : end);

/**
 * How a block cut by a part is opened again in the next: with the same indentation and backticks, so the same lines
 * close it, and its info string's start (the language). A fence so long that its reopening and closing lines would
 * take more than half a part (never written in practice) is shortened to fit: a line of as many backticks in the
 * block would then end it early.
 */
export function reopened(open: OpenFence, max: number): OpenFence {
  // Kept short, less half a surrogate pair at its cut.
  const info = open.info.trimEnd().slice(0, 12).replace(/[\ud800-\udbff]$/, "");
  const { indent, marker } = open;
  // The reopening line and the closing one, each with its line break.
  if (2 * marker.length + indent.length + info.length + 2 <= max / 2) return { indent, marker, info };
  return { indent, marker: "`".repeat(Math.max(3, Math.min(marker.length, Math.floor((max / 2 - 2 - indent.length) / 2)))), info: "" };
}

export const fenceLine = (open: OpenFence) => open.indent + open.marker + open.info;
