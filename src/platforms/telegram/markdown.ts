/**
 * An answer's Markdown (as language models write it) as Telegram HTML, for `parse_mode: "HTML"`: fenced code blocks,
 * headings (bold lines), block quotes, bullet items, rules and tables (Telegram has none: an aligned monospaced
 * block, or for a wide one a record per row, ../markdown/table-text.ts), each line's inline Markdown by ./inline.ts.
 * Whatever it does not recognise stays as text. The result is always well-formed, for any input: a streamed draft cut anywhere
 * (an unterminated code block is closed, an unpaired `**` is text), and each part of a split reply on its own
 * (splitReply closes a code block at a part's end and opens it again in the next).
 */
import { bulletOf, languageOf, lineOf, markdownBlocks, unquoted, type Block } from "../markdown/blocks";
import { tableMarkdown } from "../markdown/table-text";
import { escapeHtml, inlineHtml, visible } from "./inline";

/** Monospaced characters a phone in portrait shows on a line of a code block: a wider table goes as records. */
export const TELEGRAM_TABLE_COLUMNS = 40;

/** The answer as Telegram HTML, or null when it would show no text at all (Telegram refuses an empty message). */
export function telegramHtml(markdown: string): string | null {
  const html = markdownBlocks(markdown).map(blockHtml).join("\n");
  return visible(html) ? html : null;
}

function blockHtml(block: Block): string {
  if (block.kind === "code") return codeBlock(block.lines, block.info);
  if (block.kind === "quote") return quote(block.lines);
  // Rendered as the Markdown it is shown as (no table in it): the delivery gives the split that same Markdown.
  if (block.kind === "table") return telegramHtml(tableMarkdown(block.table, TELEGRAM_TABLE_COLUMNS)) ?? "";
  return lineHtml(block.line, block.depth);
}

function codeBlock(body: string[], info: string): string {
  const code = body.join("\n");
  // An empty block (a draft whose block has only just opened) shows nothing yet: no entity without text.
  if (!code.trim()) return "";
  const language = languageOf(info);
  const escaped = escapeHtml(code);
  return language ? `<pre><code class="language-${language}">${escaped}</code></pre>` : `<pre>${escaped}</pre>`;
}

/** Consecutive `>` lines as one quote (Telegram nests none: a `>` inside it is text); a quote of nothing stays text. */
function quote(lines: string[]): string {
  const inner = lines.map((line) => lineHtml(unquoted(line)));
  if (!inner.some(visible)) return lines.map(lineHtml).join("\n");
  return `<blockquote>${inner.join("\n")}</blockquote>`;
}

/** A line outside code blocks and quotes: a heading (a bold line), a rule, a bullet item (`depth` deep) or text. */
function lineHtml(source: string, depth = 0): string {
  const line = lineOf(source);
  if (line.kind === "heading") return `<b>${inlineHtml(line.text, ["b"])}</b>`;
  if (line.kind === "rule") return "———";
  if (line.kind === "bullet") return `${line.indent}${bulletOf(depth)} ${inlineHtml(line.text)}`;
  return inlineHtml(line.text);
}
