/**
 * A GFM table (./tables.ts) as Markdown a chat without tables reads well: a code block of aligned columns (monospaced,
 * so they line up) when its lines fit in `columns` characters, else one record per row (`**Header:** value` lines,
 * each cell's own Markdown kept), as a wider block would wrap on a phone and read as a jumble again. In the block, a
 * cell shows the text its Markdown shows (a link as its text and URL), and `<br>` starts another line of its row.
 */
import { parseInline, type Inline } from "./inline";
import type { Align, Table } from "./tables";

/** In a cell every link is one: its URL is shown as text. */
const ANY_LINK = { linkTarget: /^/ };
const BREAK = /<br\s*\/?>/gi;
/** ``` anywhere in a block could end it (Slack reads it so, CommonMark on a line of its own): look-alike accents. */
const FENCE_RUN = /`{3,}/g;
const defused = (text: string) => text.replace(FENCE_RUN, (run) => "\u02cb".repeat(run.length));

export function tableMarkdown(table: Table, columns: number): string {
  const cells = [table.header, ...table.rows].map((row) => row.map(cellLines));
  const widths = table.align.map((_, c) => cells.reduce((most, row) => row[c].reduce((m, line) => Math.max(m, displayWidth(line)), most), 0));
  const width = widths.reduce((a, b) => a + b, 0) + 3 * (widths.length - 1);
  return width <= columns ? aligned(cells, widths, table.align) : records(table);
}

function aligned(cells: string[][][], widths: number[], align: Align[]): string {
  const lines = (row: string[][]) =>
    Array.from({ length: row.reduce((most, c) => Math.max(most, c.length), 1) }, (_, l) =>
      row
        .map((cell, c) => pad(cell[l] ?? "", widths[c], align[c]))
        .join(" │ ")
        .trimEnd(),
    );
  const [header, ...rows] = cells;
  const rule = widths.map((w) => "─".repeat(w)).join("─┼─");
  return ["```", ...lines(header), rule, ...rows.flatMap(lines), "```"].join("\n");
}

function pad(text: string, width: number, align: Align): string {
  const room = width - displayWidth(text);
  if (align === "right") return " ".repeat(room) + text;
  if (align === "center") return " ".repeat(Math.floor(room / 2)) + text + " ".repeat(room - Math.floor(room / 2));
  return text + " ".repeat(room);
}

/** A cell as the lines of text it shows. */
const cellLines = (markdown: string) => markdown.split(BREAK).map((piece) => defused(plainText(parseInline(piece.trim(), ANY_LINK)).replace(/\t/g, " ")));

function plainText(nodes: readonly Inline[]): string {
  return nodes
    .map((n) => {
      if (n.kind === "text") return n.text;
      if (n.kind === "code") return n.code;
      if (n.kind === "url") return n.url;
      if (n.kind === "span") return plainText(n.children);
      const label = plainText(n.label);
      return label === n.url ? label : `${label} (${n.url})`;
    })
    .join("");
}

/** Each row as `**Header:** value` lines (an empty cell left out), rows apart by a blank line. */
function records(table: Table): string {
  const labels = table.header.map((h) => escapeMarkdown(plainText(parseInline(h.replace(BREAK, " "), ANY_LINK)).trim()));
  if (!table.rows.length) return labels.filter(Boolean).join(" · ");
  return table.rows
    .map((row) =>
      row
        .flatMap((cell, c) => (cell ? [`${labels[c] ? `**${labels[c]}:** ` : ""}${cell.split(BREAK).map(recordLine).join("\n")}`] : []))
        .join("\n"),
    )
    .filter(Boolean)
    .join("\n\n");
}

/** A line of a cell in a record: its Markdown rendered, unless it would open a code block swallowing what follows. */
const recordLine = (line: string) => (/^`{3}/.test(line.trim()) ? defused(line.trim()) : line.trim());

/** Text that shows as itself in Markdown: what the inline parser acts on, backslash-escaped. */
const escapeMarkdown = (text: string) => text.replace(/[\\`*_~[\]<>!|]/g, "\\$&");

let graphemes: Intl.Segmenter | undefined;
/** East Asian wide characters (CJK, Hangul, fullwidth forms) take two columns of a monospaced font. */
const WIDE = /^[\u1100-\u115f\u2e80-\u303e\u3041-\u33ff\u3400-\u4dbf\u4e00-\u9fff\ua000-\ua4cf\uac00-\ud7a3\uf900-\ufaff\ufe30-\ufe4f\uff00-\uff60\uffe0-\uffe6\u{20000}-\u{3fffd}]/u;
const EMOJI = /\p{Emoji_Presentation}|\ufe0f/u;
const ZERO_WIDTH = /^[\p{M}\p{Cf}]+$/u;

/** How many columns of a monospaced font a text takes, a character (grapheme) at a time. */
export function displayWidth(text: string): number {
  if (/^[\x20-\x7e]*$/.test(text)) return text.length;
  graphemes ??= new Intl.Segmenter(undefined, { granularity: "grapheme" });
  let width = 0;
  for (const { segment } of graphemes.segment(text)) width += ZERO_WIDTH.test(segment) ? 0 : WIDE.test(segment) || EMOJI.test(segment) ? 2 : 1;
  return width;
}
