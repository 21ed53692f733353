/**
 * Tables as ./split.ts cuts them, so a table cut by a part reads as one in the next: that part starts with the table's
 * header again (a GFM table's header and delimiter rows; in a code block, an aligned table's header and rule, as
 * ./markdown/table-text.ts draws them), and a cut never leaves a table's header without its rows. Tables are read as
 * the renderers read them (./markdown/tables.ts): never inside a code block, a header's rows up to a line of none.
 */
import { closesFence, fenceOpening } from "./markdown/blocks";
import { rowCells, tableAt } from "./markdown/tables";
import { lineBefore, type OpenFence } from "./split-fences";

/** An aligned table's rule line: the line before it is its header. */
const RULE = /^[─┼]+$/;

/**
 * A table a piece ends inside: the lines a part going on with it repeats, where they start (-1: before the piece), how
 * many of its rows the piece holds, and whether it is in a code block (the part reopens that first).
 */
export interface TableInside {
  head: string;
  start: number;
  rows: number;
  inCode: boolean;
}

/** The piece's whole lines (it ends at a line break), each with where it starts. */
function linesOf(piece: string): Array<{ line: string; at: number }> {
  const lines: Array<{ line: string; at: number }> = [];
  for (let at = 0; at < piece.length; ) {
    const end = piece.indexOf("\n", at);
    lines.push({ line: lineBefore(piece, at, end), at });
    at = end + 1;
  }
  return lines;
}

const firstLine = (text: string) => {
  const end = text.indexOf("\n");
  return end < 0 ? text : lineBefore(text, 0, end);
};

/**
 * The table `piece` (a part's text, up to a line break) ends inside, when `next` (the text after it) goes on with it.
 * `open` is the code block open before the piece and `carried` the head its part repeats: it starts in that table.
 */
export function tableInside(piece: string, next: string, open: OpenFence | null, carried: string): TableInside | null {
  if (!piece.endsWith("\n")) return null;
  const lines = linesOf(piece);
  let fence = open;
  let table: TableInside | null = carried ? { head: carried, start: -1, rows: 0, inCode: open !== null } : null;
  /** A code block opened in the piece: where its fence line starts, and its first lines (an aligned table's head). */
  let block: { at: number; first: string[] } | null = null;
  for (let k = 0; k < lines.length; k++) {
    const { line, at } = lines[k];
    if (fence !== null) {
      if (closesFence(line, fence.marker.length)) [fence, table, block] = [null, null, null];
      else if (table) table.rows++;
      else if (block && block.first.push(line) === 2 && RULE.test(line)) table = { head: `${block.first.join("\n")}\n`, start: block.at, rows: 0, inCode: true };
      continue;
    }
    const opening = fenceOpening(line);
    if (opening) [fence, table, block] = [opening, null, { at, first: [] }];
    else if (table && rowCells(line)) table.rows++;
    else if (k + 1 < lines.length && tableAt([line, lines[k + 1].line], 0, false)) {
      table = { head: `${line}\n${lines[k + 1].line}\n`, start: at, rows: 0, inCode: false };
      k++;
    } else table = null;
  }
  if (!table) return null;
  const after = firstLine(next);
  // In a code block the table goes on unless the block ends; else while rows follow.
  return (fence !== null ? !closesFence(after, fence.marker.length) : rowCells(after) !== null) ? table : null;
}

/**
 * A cut moved to where a table it would leave without rows in its part starts (its header then opens the next part),
 * or before a header line whose delimiter row starts the next part. Never to the text's start: a part holds something.
 */
export function clearOfTableHeads(rest: string, cut: number, open: OpenFence | null, openAtCut: OpenFence | null, carried: string): number {
  const piece = rest.slice(0, cut);
  const inside = tableInside(piece, rest.slice(cut), open, carried);
  if (inside) return inside.rows === 0 && inside.start > 0 ? inside.start : cut;
  if (!piece.endsWith("\n") || openAtCut !== null) return cut;
  const last = piece.lastIndexOf("\n", piece.length - 2) + 1;
  return last > 0 && tableAt([lineBefore(piece, last, piece.length - 1), firstLine(rest.slice(cut))], 0, false) ? last : cut;
}
