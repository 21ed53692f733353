/**
 * An answer's Markdown (as language models write it) as the Markdown of a Lark card's `markdown` element (card JSON
 * 2.0, which renders CommonMark and GFM): the same constructs the host renders for Telegram (emphasis, strikethrough,
 * code spans, fenced code blocks with their language, links to http(s) URLs, `#` headings, `>` quotes, bullet items
 * as `•`, rules) and GFM tables, which Lark renders (its docs: at most four in an element), written out anew; every
 * other character Lark's Markdown would act on is escaped as Lark asks, as an HTML entity (`&#42;`), so it shows as
 * typed. Nothing reaches Lark as a tag but a table cell's `<br>`: `<at id=all>` and the like are text, and
 * in code (where nothing is escaped) a zero-width space keeps `<at` from being one. Well-formed for any input, as
 * ../markdown/blocks.ts and ../markdown/inline.ts make it: a draft's open code block shows closed, an unpaired `**` as
 * typed.
 */
import { bulletOf, languageOf, lineOf, markdownBlocks, unquoted } from "../markdown/blocks";
import { parseInline, type Inline, type Tag } from "../markdown/inline";
import { tableMarkdown } from "../markdown/table-text";
import type { Table } from "../markdown/tables";

export interface LarkMarkdown {
  content: string;
  /** Whether anything in it renders other than as the text it was (a bare URL linked is not counted). */
  formatted: boolean;
}

const LARK_LINKS = { linkTarget: /^https?:\/\/[^\s/?#]+/i };
/** Lark's rich text takes up to four tables (each paged by five rows); past them a table is a monospaced block. */
const LARK_MAX_TABLES = 4;
const LARK_TABLE_COLUMNS = 60;
const BREAK = /<br\s*\/?>/gi;
const MARKERS: Record<Tag, string> = { b: "**", i: "*", s: "~~" };

/** The answer as Lark card Markdown, or null when it would show nothing (Lark refuses an empty element). */
export function larkMarkdown(markdown: string): LarkMarkdown | null {
  const out = { formatted: false };
  const tables: number[] = [];
  const rendered = markdownBlocks(markdown).map((block, k) => {
    if (block.kind === "line") return lineMarkdown(block.line, out, block.depth);
    if (block.kind === "quote") return quote(block.lines, out);
    if (block.kind === "table") {
      out.formatted = true;
      // Lark shows at most four tables in a `markdown` element: the rest as other chats show them.
      if (tables.length < LARK_MAX_TABLES) {
        tables.push(k);
        return nativeTable(block.table, out);
      }
      return larkMarkdown(tableMarkdown(block.table, LARK_TABLE_COLUMNS))?.content ?? "";
    }
    const code = block.lines.join("\n");
    // An empty block (a draft whose block has only just opened) shows nothing yet.
    if (!code.trim()) return "";
    out.formatted = true;
    const fence = "`".repeat(Math.max(3, longestRun(code, "`") + 1));
    return `${fence}${languageOf(block.info) ?? ""}\n${inertMentions(code)}\n${fence}`;
  });
  // A blank line around each table: GFM would take a line just after it for a row, one before it (a quote's) as lazy.
  for (const k of tables) rendered[k] = `${k > 0 && rendered[k - 1].trim() ? "\n" : ""}${rendered[k]}${k + 1 < rendered.length && rendered[k + 1].trim() ? "\n" : ""}`;
  const content = rendered.join("\n");
  return content.trim() ? { content, formatted: out.formatted } : null;
}

/**
 * Characters Lark's Markdown may act on anywhere in a line, escaped as entities (as its docs ask: `&#42;` for `*`),
 * which also keeps them punctuation to CommonMark's emphasis rules, so the spans written around them pair as parsed.
 * A colon before a letter could open an emoji code (`:OK:`).
 */
const escapeText = (text: string) => text.replace(/[\\`*_~[\]<>&|]|:(?=[A-Za-z])/g, (c) => `&#${c.charCodeAt(0)};`);

/** What would make a line a list item, a heading or a setext underline where it starts. */
const BLOCK_START = /^(?:[-+=#]|\d{1,9}[.)])/;

/** The line's start kept text: its indentation as no-break spaces, a list or heading marker escaped. A blank line stays blank. */
function asTextLine(rendered: string): string {
  const indent = /^[ \t]*/.exec(rendered)![0];
  const rest = rendered.slice(indent.length);
  if (!rest) return "";
  return nbsp(indent) + (BLOCK_START.test(rest) ? `&#${rest.charCodeAt(0)};${rest.slice(1)}` : rest);
}

/** Indentation Lark keeps (leading spaces would be dropped, or make an indented code block). */
const nbsp = (indent: string) => indent.replace(/\t/g, "    ").replace(/ /g, "&nbsp;");

/** `>` lines as one quote; a quote of nothing stays text. */
function quote(lines: string[], out: { formatted: boolean }): string {
  const inner = lines.map((line) => lineMarkdown(unquoted(line), out));
  if (!inner.some((line) => line.trim())) return lines.map((line) => lineMarkdown(line, out)).join("\n");
  out.formatted = true;
  return inner.map((line) => `> ${line}`).join("\n");
}

function lineMarkdown(source: string, out: { formatted: boolean }, depth = 0): string {
  const line = lineOf(source);
  if (line.kind === "text") return asTextLine(inline(parseInline(line.text, LARK_LINKS), new Set(), out));
  out.formatted = true;
  if (line.kind === "rule") return "<hr>";
  const text = inline(parseInline(line.text, LARK_LINKS), new Set(), out);
  if (line.kind === "heading") return `${"#".repeat(line.level)} ${text}`;
  return `${nbsp(line.indent)}${bulletOf(depth)} ${text}`;
}

/**
 * A table as GFM, which Lark renders: each cell's Markdown rendered as any line's, a `<br>` in it kept (Lark takes that
 * tag), and every pipe left in it (a code span's, a URL's) escaped as GFM reads a cell, so none splits it.
 */
function nativeTable(table: Table, out: { formatted: boolean }): string {
  const cell = (markdown: string) =>
    markdown
      .split(BREAK)
      .map((piece) => inline(parseInline(piece.trim(), LARK_LINKS), new Set(), out).replace(/\|/g, "\\|"))
      .join("<br>");
  const row = (cells: string[]) => `| ${cells.map(cell).join(" | ")} |`;
  const delimiter = table.align.map((a) => (a === "center" ? ":---:" : a === "right" ? "---:" : a === "left" ? ":---" : "---"));
  return [row(table.header), `| ${delimiter.join(" | ")} |`, ...table.rows.map(row)].join("\n");
}

function inline(nodes: readonly Inline[], open: ReadonlySet<Tag>, out: { formatted: boolean }, inLink = false): string {
  let md = "";
  for (const n of nodes) {
    if (n.kind === "text") md += escapeText(n.text);
    // A bare URL is linked: left as text, its escapes would break Lark's own linking of it.
    else if (n.kind === "url") md += inLink || !LARK_LINKS.linkTarget.test(n.url) ? escapeText(n.url) : `[${escapeText(n.url)}](${destination(n.url)})`;
    else if (n.kind === "code") {
      out.formatted = true;
      md += codeSpan(n.code);
    } else if (n.kind === "link") {
      out.formatted = true;
      md += `[${inline(n.label, new Set(), out, true)}](${destination(n.url)})`;
    } else if (open.has(n.tag)) md += inline(n.children, open, out, inLink);
    else {
      out.formatted = true;
      md += `${MARKERS[n.tag]}${inline(n.children, new Set([...open, n.tag]), out, inLink)}${MARKERS[n.tag]}`;
    }
  }
  return md;
}

/** A code span shows its text as it is (nothing in it is escaped): fenced by more backticks than it holds. */
function codeSpan(code: string): string {
  const fence = "`".repeat(longestRun(code, "`") + 1);
  const pad = code.startsWith("`") || code.endsWith("`") || (code.startsWith(" ") && code.endsWith(" ") && code.trim()) ? " " : "";
  return `${fence}${pad}${inertMentions(code)}${pad}${fence}`;
}

/** A URL as a link's destination: what would end it or be read as Markdown in it percent-encoded. */
const destination = (url: string) => url.replace(/[\s()<>\\`]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, "0")}`);

/**
 * `<at …>` mentions someone (`<at id=all>`, or in a text message `<at user_id="all">`, everyone), and Lark documents no
 * escape where text is shown as it is (code, a text message): a zero-width space after the `<` breaks it, while the
 * text reads the same.
 */
export const inertMentions = (code: string) => code.replace(/<(?=\s*at\b)/gi, "<\u200b");

function longestRun(text: string, char: string): number {
  let longest = 0;
  for (let i = 0, run = 0; i < text.length; i++) longest = Math.max(longest, (run = text[i] === char ? run + 1 : 0));
  return longest;
}
