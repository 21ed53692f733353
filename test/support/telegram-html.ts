/**
 * What Telegram's Bot API would refuse in a `parse_mode: "HTML"` text (as "Bad Request: can't parse entities: …"), or
 * null: only its tags, each closed in order, `a` with an href, `code` in `pre` only with a language class, no tag
 * inside `code` or `pre` nor a quote in a quote, `& < >` only as entities, and some text left to show. Stricter than
 * Telegram where it tolerates sloppiness (a raw `>`), so a test catches output that merely happens to pass.
 */
const TAGS = new Set(["b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "a", "code", "pre", "blockquote", "tg-spoiler", "span"]);
const TOKEN = /<(\/?)([a-z-]+)((?:\s+[a-z-]+="[^"<>]*")*)\s*>|&(?:#\d+|#x[0-9a-f]+|lt|gt|amp|quot);|[<>&]/gi;

export function telegramHtmlProblem(html: string): string | null {
  const open: string[] = [];
  let text = "";
  let last = 0;
  for (const m of html.matchAll(TOKEN)) {
    text += html.slice(last, m.index);
    last = m.index + m[0].length;
    if (m[0].startsWith("&") && m[0].length > 1) {
      text += "x";
      continue;
    }
    if (m[2] === undefined) return `a raw ${JSON.stringify(m[0])} at ${m.index}`;
    const [closing, tag, attributes] = [m[1] === "/", m[2].toLowerCase(), m[3]];
    if (!TAGS.has(tag)) return `unsupported tag <${tag}> at ${m.index}`;
    if (closing) {
      if (attributes) return `attributes on </${tag}>`;
      if (open.at(-1) !== tag) return `</${tag}> at ${m.index} closes ${open.at(-1) ?? "nothing"}`;
      open.pop();
      continue;
    }
    const inside = open.at(-1);
    if (inside === "code" || (inside === "pre" && tag !== "code")) return `<${tag}> inside <${inside}> at ${m.index}`;
    if (tag === "blockquote" && open.includes("blockquote")) return "a quote inside a quote";
    if (tag === "a" && (open.includes("a") || !/^\s+href="[^"]+"$/.test(attributes))) return `a link without an href, or in a link, at ${m.index}`;
    if (tag === "code" && attributes && !(inside === "pre" && /^\s+class="language-[^"]+"$/.test(attributes))) return `<code${attributes}> at ${m.index}`;
    if (tag !== "a" && tag !== "code" && attributes) return `<${tag}${attributes}> at ${m.index}`;
    open.push(tag);
  }
  text += html.slice(last);
  if (open.length) return `unclosed <${open.join("><")}>`;
  if (!text.trim()) return "no text to show";
  return null;
}
