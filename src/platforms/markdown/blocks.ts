/**
 * An answer's Markdown cut into the blocks a platform renders in its own terms: fenced code blocks, block quotes, GFM
 * tables (./tables.ts) and single lines (a heading, a rule, a bullet item or text). A code block still open at the end
 * (a streamed draft, or a part of a split reply cut inside it) ends with the text, so whatever renders it shows it
 * closed.
 */
import { tableAt, type Table } from "./tables";

export type Block =
  /**
   * Its lines less the indentation its opening fence had; `info` is what follows the fence (the language); `closed`
   * whether a fence ended it (a renderer that adds the closing line counts what it adds).
   */
  | { kind: "code"; info: string; lines: string[]; closed: boolean }
  /** Consecutive `>` lines, as written. */
  | { kind: "quote"; lines: string[] }
  | { kind: "table"; table: Table }
  /** `depth`: how deeply a list item (bulleted or numbered) is nested in the items above it, 0 at the top. */
  | { kind: "line"; line: string; depth: number };

export type Line = { kind: "heading"; level: number; text: string } | { kind: "rule" } | { kind: "bullet"; indent: string; text: string } | { kind: "text"; text: string };

const FENCE_OPEN = /^( {0,3})(`{3,})([^`]*)$/;
/** A heading's start; its text and closing `#`s are read by headingText (a regex for them took quadratic time). */
const HEADING = /^ {0,3}(#{1,6})[ \t]/;
const QUOTE = /^ {0,3}> ?/;
const BULLET = /^([ \t]*)[-*+][ \t]+([^]*)$/;
const RULE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;

export function markdownBlocks(markdown: string): Block[] {
  const lines = markdown.split(/\r?\n/);
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; ) {
    const fence = fenceOpening(lines[i]);
    if (fence) {
      const { indent, marker, info } = fence;
      const body: string[] = [];
      let j = i + 1;
      for (; j < lines.length && !closesFence(lines[j], marker.length); j++) body.push(withoutIndent(lines[j], indent.length));
      blocks.push({ kind: "code", info, lines: body, closed: j < lines.length });
      i = j + 1;
      continue;
    }
    if (QUOTE.test(lines[i])) {
      let j = i;
      while (j < lines.length && QUOTE.test(lines[j])) j++;
      blocks.push({ kind: "quote", lines: lines.slice(i, j) });
      i = j;
      continue;
    }
    const table = tableAt(lines, i);
    if (table) {
      blocks.push({ kind: "table", table: table.table });
      i = table.end;
      continue;
    }
    blocks.push({ kind: "line", line: lines[i], depth: 0 });
    i++;
  }
  nestLists(blocks);
  return blocks;
}

const ORDERED = /^([ \t]*)\d{1,9}[.)](?:[ \t]|$)/;
/** Each nesting level's bullet, as Slack draws nested lists: a nested item reads as one where indentation is slight. */
const BULLETS = ["•", "◦", "▪"];
export const bulletOf = (depth: number) => BULLETS[depth % BULLETS.length];

/**
 * Each list item's depth: the items it is indented under. A blank line, a code block or a table keeps the list going
 * (an item's block), a line of text at the margin ends it.
 */
function nestLists(blocks: Block[]): void {
  const indents: number[] = [];
  for (const block of blocks) {
    if (block.kind !== "line" || !block.line.trim()) continue;
    const lead = /^[ \t]*/.exec(block.line)![0];
    const indent = lead.replace(/\t/g, "    ").length;
    if (lineOf(block.line).kind !== "bullet" && !ORDERED.test(block.line)) {
      if (indent === 0) indents.length = 0;
      continue;
    }
    while (indents.length && indents.at(-1)! >= indent) indents.pop();
    block.depth = indents.length;
    indents.push(indent);
  }
}

/** Whether a line is a block quote's. */
export const isQuoteLine = (line: string) => QUOTE.test(line);

/** A quote's line without its `>`. */
export const unquoted = (line: string) => line.replace(QUOTE, "");

/** What a line outside code blocks is: a heading (one with text), a rule, a bullet item, or text. */
export function lineOf(line: string): Line {
  const heading = HEADING.exec(line);
  const text = heading && headingText(line.slice(heading[0].length));
  if (heading && text?.trim()) return { kind: "heading", level: heading[1].length, text };
  if (RULE.test(line)) return { kind: "rule" };
  const bullet = BULLET.exec(line);
  if (bullet) return { kind: "bullet", indent: bullet[1], text: bullet[2] };
  return { kind: "text", text: line };
}

/** A heading's text less the spaces around it and a closing run of `#` after a space (`## Title ##`). Linear. */
function headingText(rest: string): string {
  const isSpace = (c: string | undefined) => c === " " || c === "\t";
  let start = 0;
  while (isSpace(rest[start])) start++;
  let end = rest.length;
  while (end > start && isSpace(rest[end - 1])) end--;
  let hashes = end;
  while (hashes > start && rest[hashes - 1] === "#") hashes--;
  if (hashes < end && hashes > start && isSpace(rest[hashes - 1])) {
    end = hashes;
    while (end > start && isSpace(rest[end - 1])) end--;
  }
  return rest.slice(start, end);
}

/** The language a code block's info string names, when it looks like one. */
export function languageOf(info: string): string | null {
  const language = info.trim().split(/\s/)[0];
  return /^[A-Za-z0-9_+#.-]{1,32}$/.test(language) ? language : null;
}

/**
 * An opening fence: up to three spaces, three or more backticks, and an info string with none (```npm ci``` is no
 * fence). Exported with closesFence for ../split.ts, which must read fences as the renderers do.
 */
export function fenceOpening(line: string): { indent: string; marker: string; info: string } | null {
  const fence = FENCE_OPEN.exec(line);
  return fence && { indent: fence[1], marker: fence[2], info: fence[3] };
}

/** A closing fence: at least as many backticks as the opening one, and nothing after them. */
export function closesFence(line: string, length: number): boolean {
  const fence = /^ {0,3}(`{3,})[ \t]*$/.exec(line);
  return fence !== null && fence[1].length >= length;
}

/** A code line less the indentation its opening fence had (a block in a list item). */
function withoutIndent(line: string, indent: number): string {
  let strip = 0;
  while (strip < indent && line[strip] === " ") strip++;
  return line.slice(strip);
}
