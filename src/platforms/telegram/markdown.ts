/**
 * An answer's Markdown (as language models write it) as Telegram HTML, for `parse_mode: "HTML"`: fenced code blocks,
 * headings (bold lines), block quotes, bullet items and rules, each line's inline Markdown by ./inline.ts. Whatever it
 * does not recognise stays as text. The result is always well-formed, for any input: a streamed draft cut anywhere
 * (an unterminated code block is closed, an unpaired `**` is text), and each part of a split reply on its own
 * (splitReply closes a code block at a part's end and opens it again in the next).
 */
import { languageOf, lineOf, markdownBlocks, unquoted } from "../markdown/blocks";
import { escapeHtml, inlineHtml, visible } from "./inline";

/** The answer as Telegram HTML, or null when it would show no text at all (Telegram refuses an empty message). */
export function telegramHtml(markdown: string): string | null {
  const html = markdownBlocks(markdown)
    .map((block) => (block.kind === "code" ? codeBlock(block.lines, block.info) : block.kind === "quote" ? quote(block.lines) : lineHtml(block.line)))
    .join("\n");
  return visible(html) ? html : null;
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

/** A line outside code blocks and quotes: a heading (a bold line), a rule, a bullet item or text. */
function lineHtml(source: string): string {
  const line = lineOf(source);
  if (line.kind === "heading") return `<b>${inlineHtml(line.text, ["b"])}</b>`;
  if (line.kind === "rule") return "———";
  if (line.kind === "bullet") return `${line.indent}• ${inlineHtml(line.text)}`;
  return inlineHtml(line.text);
}
