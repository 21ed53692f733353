/**
 * An answer's Markdown (as language models write it) as Telegram HTML, for `parse_mode: "HTML"`: fenced code blocks,
 * headings (bold lines), block quotes, bullet items and rules, each line's inline Markdown by ./inline.ts. Whatever it
 * does not recognise stays as text. The result is always well-formed, for any input: a streamed draft cut anywhere
 * (an unterminated code block is closed, an unpaired `**` is text), and each part of a split reply on its own
 * (splitReply closes a code block at a part's end and opens it again in the next).
 */
import { escapeHtml, inlineHtml, visible } from "./inline";

const FENCE_OPEN = /^( {0,3})(`{3,})([^`]*)$/;
const HEADING = /^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$/;
const QUOTE = /^ {0,3}> ?/;
const BULLET = /^([ \t]*)[-*+][ \t]+(.*)$/;
const RULE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
/** What a code block's info string may name as its language (Telegram's `class="language-…"`). */
const LANGUAGE = /^[A-Za-z0-9_+#.-]{1,32}$/;

/** The answer as Telegram HTML, or null when it would show no text at all (Telegram refuses an empty message). */
export function telegramHtml(markdown: string): string | null {
  const lines = markdown.split(/\r?\n/);
  const out: string[] = [];
  for (let i = 0; i < lines.length; ) {
    const fence = FENCE_OPEN.exec(lines[i]);
    if (fence) {
      const [, indent, marker, info] = fence;
      const body: string[] = [];
      let j = i + 1;
      for (; j < lines.length && !closesFence(lines[j], marker.length); j++) body.push(withoutIndent(lines[j], indent.length));
      out.push(codeBlock(body, info));
      // A block still open at the end (a draft, or a part cut inside it) ends with the text.
      i = j + 1;
      continue;
    }
    if (QUOTE.test(lines[i])) {
      let j = i;
      while (j < lines.length && QUOTE.test(lines[j])) j++;
      out.push(quote(lines.slice(i, j)));
      i = j;
      continue;
    }
    out.push(lineHtml(lines[i]));
    i++;
  }
  const html = out.join("\n");
  return visible(html) ? html : null;
}

/** A closing fence: at least as many backticks as the opening one, and nothing after them. */
function closesFence(line: string, length: number): boolean {
  const fence = /^ {0,3}(`{3,})[ \t]*$/.exec(line);
  return fence !== null && fence[1].length >= length;
}

/** A code line less the indentation its opening fence had (a block in a list item). */
function withoutIndent(line: string, indent: number): string {
  let strip = 0;
  while (strip < indent && line[strip] === " ") strip++;
  return line.slice(strip);
}

function codeBlock(body: string[], info: string): string {
  const code = body.join("\n");
  // An empty block (a draft whose block has only just opened) shows nothing yet: no entity without text.
  if (!code.trim()) return "";
  const language = info.trim().split(/\s/)[0];
  const escaped = escapeHtml(code);
  return LANGUAGE.test(language) ? `<pre><code class="language-${language}">${escaped}</code></pre>` : `<pre>${escaped}</pre>`;
}

/** Consecutive `>` lines as one quote (Telegram nests none: a `>` inside it is text); a quote of nothing stays text. */
function quote(lines: string[]): string {
  const inner = lines.map((line) => lineHtml(line.replace(QUOTE, "")));
  if (!inner.some(visible)) return lines.map(lineHtml).join("\n");
  return `<blockquote>${inner.join("\n")}</blockquote>`;
}

/** A line outside code blocks and quotes: a heading, a rule, a bullet item or text. */
function lineHtml(line: string): string {
  const heading = HEADING.exec(line);
  if (heading && heading[2].trim()) return `<b>${inlineHtml(heading[2], ["b"])}</b>`;
  if (RULE.test(line)) return "———";
  const bullet = BULLET.exec(line);
  if (bullet) return `${bullet[1]}• ${inlineHtml(bullet[2])}`;
  return inlineHtml(line);
}
