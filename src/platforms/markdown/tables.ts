/**
 * GFM tables as language models write them: a header row, a delimiter row (`| --- | :-: |`) with as many cells, then
 * rows up to a blank line or a line without a pipe. Two departures from GFM, so that nothing written is lost: a pipe
 * inside a code span is the span's (`` `a|b` ``), and a row with more cells than the header adds columns. A delimiter
 * row still being streamed (`|---|-`) at the very end counts as whole, so a draft's table shows as one from its start.
 * One pass over each line.
 */
import { fenceOpening, lineOf } from "./blocks";

export type Align = "left" | "right" | "center" | null;

export interface Table {
  /** Each row's cells as Markdown, trimmed, `\|` read as `|`; every row (and the header) has `align.length` cells. */
  header: string[];
  align: Align[];
  rows: string[][];
}

const DELIMITER_CELL = /^:?-+:?$/;
/** A delimiter cell still being typed (`:-`, `-`, ``) at the end of a draft. */
const PARTIAL_DELIMITER_CELL = /^:?-*:?$/;

/**
 * The table whose header is lines[i], and the index of the line after it; null when there is none. `lastIsPartial`:
 * the last line has no line break after it (a draft's end), so a delimiter row there may still be growing.
 */
export function tableAt(lines: readonly string[], i: number, lastIsPartial = true): { table: Table; end: number } | null {
  if (i + 1 >= lines.length || !lines[i].includes("|") || !startsRow(lines[i])) return null;
  const header = cellsOf(lines[i]);
  if (!header) return null;
  const align = delimiterRow(lines[i + 1], header.length, lastIsPartial && i + 1 === lines.length - 1);
  if (!align) return null;
  const rows: string[][] = [];
  let end = i + 2;
  for (; end < lines.length; end++) {
    const cells = rowCells(lines[end]);
    if (!cells) break;
    rows.push(cells);
  }
  const width = rows.reduce((most, r) => Math.max(most, r.length), header.length);
  const padded = (cells: string[]) => [...cells, ...Array<string>(width - cells.length).fill("")];
  return { table: { header: padded(header), align: [...align, ...Array<Align>(width - align.length).fill(null)], rows: rows.map(padded) }, end };
}

/** A line's cells when it is a table's row (after a header), else null. */
export const rowCells = (line: string) => (startsRow(line) ? cellsOf(line) : null);

/** Whether a line may be a table's row: not blank, nor another block's start (a fence, a quote, a heading, a list item). */
function startsRow(line: string): boolean {
  const trimmed = line.trim();
  if (!trimmed || fenceOpening(line) || trimmed.startsWith(">")) return false;
  return trimmed.startsWith("|") || lineOf(line).kind === "text";
}

/** A delimiter row's alignments, `count` of them; null when the line is none (one still growing at a draft's end is). */
function delimiterRow(line: string, count: number, partial: boolean): Align[] | null {
  if (!line.includes("|") && !(partial && count > 1)) return null;
  const cells = cellsOf(line) ?? [line.trim()];
  const whole = cells.length === count && cells.every((c) => DELIMITER_CELL.test(c));
  const growing = partial && line.trim() !== "" && cells.length <= count && cells.every((c, k) => (k < cells.length - 1 ? DELIMITER_CELL : PARTIAL_DELIMITER_CELL).test(c));
  if (!whole && !growing) return null;
  return Array.from({ length: count }, (_, k) => {
    const c = cells[k] ?? "";
    return c.startsWith(":") && c.endsWith(":") && c.length > 1 ? "center" : c.endsWith(":") ? "right" : c.startsWith(":") ? "left" : null;
  });
}

/**
 * A row's cells, or null when it has no pipe that separates cells (escaped, or in a code span). Leading and trailing
 * pipes are optional, as in GFM. Linear: each backtick run's partner (the next run as long) is found in one pass.
 */
export function cellsOf(line: string): string[] | null {
  const closer = closingRuns(line);
  const cells: string[] = [];
  let cell = "";
  let split = false;
  for (let i = 0; i < line.length; ) {
    const c = line[i];
    if (c === "\\" && line[i + 1] === "|") {
      cell += "|";
      i += 2;
    } else if (c === "\\") {
      cell += line.slice(i, i + 2);
      i += 2;
    } else if (c === "`") {
      // A span is copied whole: its pipes are its own (and `\|` in it is a pipe, as GFM reads a cell).
      const end = closer.get(i) ?? i + runLength(line, i);
      cell += line.slice(i, end).replace(/\\\|/g, "|");
      i = end;
    } else if (c === "|") {
      cells.push(cell);
      cell = "";
      split = true;
      i++;
    } else {
      cell += c;
      i++;
    }
  }
  cells.push(cell);
  if (!split) return null;
  const trimmed = cells.map((c) => c.trim());
  // The pipes at the line's edges bound the row; they open or close no cell.
  if (trimmed[0] === "" && line.trimStart().startsWith("|")) trimmed.shift();
  if (trimmed.length > 1 && trimmed.at(-1) === "" && /\|\s*$/.test(line) && !/\\\|\s*$/.test(line)) trimmed.pop();
  return trimmed.length ? trimmed : [""];
}

const runLength = (text: string, at: number) => {
  let end = at;
  while (text[end] === "`") end++;
  return end - at;
};

/**
 * For each backtick run, where the code span it would open ends: after the next run exactly as long, found as
 * ./inline.ts finds it (escapes do not count inside a span). One pass from the end.
 */
function closingRuns(line: string): Map<number, number> {
  const runs: Array<[number, number]> = [];
  for (let i = line.indexOf("`"); i >= 0; i = line.indexOf("`", i)) {
    const n = runLength(line, i);
    runs.push([i, n]);
    i += n;
  }
  const ends = new Map<number, number>();
  const next = new Map<number, number>();
  for (let k = runs.length - 1; k >= 0; k--) {
    const [at, n] = runs[k];
    const partner = next.get(n);
    if (partner !== undefined) ends.set(at, partner + n);
    next.set(n, at);
  }
  return ends;
}
