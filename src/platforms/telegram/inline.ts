/**
 * One line of Markdown (parsed by ../markdown/inline.ts) as Telegram HTML: `<b>`, `<i>`, `<s>`, `<code>` and `<a>`
 * for links to http(s), tg and mailto URLs; everything else is text, with `& < >` escaped.
 */
import { parseInline, type Inline, type Tag } from "../markdown/inline";

export const escapeHtml = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
const escapeAttribute = (text: string) => escapeHtml(text).replace(/"/g, "&quot;");

const TELEGRAM_LINKS = { linkTarget: /^(?:https?:\/\/[^\s/?#]+|tg:\/\/\S+|mailto:\S+)/i };

/** A line of Markdown as HTML; `open` are the tags it is already inside of (a heading is bold), not opened again. */
export function inlineHtml(line: string, open: readonly Tag[] = []): string {
  return render(parseInline(line, TELEGRAM_LINKS), new Set(open));
}

function render(nodes: readonly Inline[], open: ReadonlySet<Tag>): string {
  let out = "";
  for (const n of nodes) {
    // A bare URL stays text: Telegram links it itself.
    if (n.kind === "text" || n.kind === "url") out += escapeHtml(n.kind === "text" ? n.text : n.url);
    else if (n.kind === "code") out += `<code>${escapeHtml(n.code)}</code>`;
    else if (n.kind === "link") out += `<a href="${escapeAttribute(n.url)}">${render(n.label, new Set())}</a>`;
    else if (open.has(n.tag)) out += render(n.children, open);
    else out += `<${n.tag}>${render(n.children, new Set([...open, n.tag]))}</${n.tag}>`;
  }
  return out;
}

/** Whether HTML shows anything: Telegram refuses a message, and may drop an entity, with no text. */
export const visible = (html: string) => html.replace(/<[^>]*>/g, "").trim() !== "";
