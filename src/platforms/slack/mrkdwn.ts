/**
 * An answer's Markdown (as language models write it) as Slack mrkdwn, for the `text` of chat.postMessage and
 * chat.update: `*bold*`, `_italic_`, `~strike~`, code spans and blocks (without their language, which Slack would
 * show as code), `<url|text>` links to http(s) and mailto URLs, headings as bold lines, bullet items as `•`, tables
 * (Slack has none) as an aligned code block or a record per row (../markdown/table-text.ts). Whatever
 * it does not recognise stays as text, with `& < >` escaped as ever, so a link's `<` and `>` are the only ones sent
 * raw: an answer can still never ping `<!channel>` or mention anyone. Slack has no escape for its markers, so they are
 * only ever added in pairs: an unpaired `**` stays as typed, a draft's code block still open is shown closed, and
 * each part of a split reply renders on its own. Parsed by ../markdown/blocks.ts and ../markdown/inline.ts.
 *
 * Never longer than the text escaped (slackSentUnits), which the reply was split by, except that closing a code block
 * still open adds its closing line: splitMessage, which reads fences as ../markdown/blocks.ts does, leaves no block
 * open in a part but the last, and room for that line in it. A table may grow (its columns padded): the delivery
 * turns tables into that Markdown before the split (../markdown/tables-as-text.ts), so none reaches here.
 */
import { bulletOf, languageOf, lineOf, markdownBlocks, unquoted } from "../markdown/blocks";
import { parseInline, type Inline, type Tag } from "../markdown/inline";
import { tableMarkdown } from "../markdown/table-text";
import type { TextFormat } from "../types";
import { escapeSlackText } from "./text";

/** Monospaced characters a code block shows on a line in a thread's pane: a wider table goes as records. */
export const SLACK_TABLE_COLUMNS = 60;
const MARKS: Record<Tag, string> = { b: "*", i: "_", s: "~" };
/** Slack formats no marker next to a letter or digit outside it: `**foo**bar` can only stay as written. */
const WORD = /[\p{L}\p{M}\p{N}]/u;
/**
 * The schemes a link may have, and nothing in its URL that would end Slack's `<url|text>` early or make the URL
 * another one (a backtick run would be read as a fence); any other link stays as the text it was written as.
 */
const SLACK_LINKS = { linkTarget: /^(?![^]*[\s|<>`\p{Cc}])(?:https?:\/\/[^\s/?#]+|mailto:\S+)/iu };
/** Slack takes ``` anywhere for a code block's edge; one not at a fence is shown as look-alike accents (ˋ). */
const STRAY_FENCE = /`{3,}/g;
const defused = (text: string) => text.replace(STRAY_FENCE, (run) => "\u02cb".repeat(run.length));

/**
 * A message's `text`: its Markdown as mrkdwn, else the text escaped (as a plain agent's is) when the mrkdwn would show
 * nothing (Slack refuses no text).
 */
export function slackText(text: string, format: TextFormat): string {
  const mrkdwn = format === "markdown" ? slackMrkdwn(text) : null;
  return mrkdwn ?? escapeSlackText(text);
}

/** The answer as mrkdwn, or null when it would show nothing (a draft whose code block has only just opened). */
export function slackMrkdwn(markdown: string): string | null {
  const text = markdownBlocks(markdown)
    .map((block) => {
      if (block.kind === "code") return codeBlock(block.info.trim(), block.lines, block.closed);
      if (block.kind === "quote") return block.lines.map(quoteLine).join("\n");
      // Rendered as the Markdown it is shown as (no table in it): the delivery gives the split that same Markdown.
      if (block.kind === "table") return slackMrkdwn(tableMarkdown(block.table, SLACK_TABLE_COLUMNS)) ?? "";
      return defused(lineMrkdwn(block.line, block.depth));
    })
    .join("\n");
  return text.trim() ? text : null;
}

/**
 * A code block, escaped. One still open (a draft, or a part cut inside it) is closed, less an empty last line (the
 * line break just streamed); one with nothing in it yet shows nothing.
 */
function codeBlock(info: string, body: string[], closed: boolean): string {
  // What follows the fence is the block's first line, unless it is only a language (Slack would show it as code).
  const first = languageOf(info) === info ? "" : info;
  const lines = !closed && body.at(-1) === "" ? body.slice(0, -1) : body;
  const code = [...(first ? [first] : []), ...lines].join("\n");
  if (!code.trim()) return "";
  return `\`\`\`${first ? "" : "\n"}${defused(escapeSlackText(code))}\n\`\`\``;
}

/** A quote's line keeps its `>` (escaped, as the text always had it); what it quotes is rendered. */
function quoteLine(line: string): string {
  const rest = unquoted(line);
  return defused(escapeSlackText(line.slice(0, line.length - rest.length).trimStart()) + lineMrkdwn(rest));
}

/** A line outside code blocks: a heading (a bold line), a rule, a bullet item (`depth` deep) or text. */
function lineMrkdwn(source: string, depth = 0): string {
  const line = lineOf(source);
  if (line.kind === "heading") return `*${inline(parseInline(line.text, SLACK_LINKS), new Set(["b"]))}*`;
  if (line.kind === "rule") return "———";
  if (line.kind === "bullet") return `${line.indent}${bulletOf(depth)} ${inline(parseInline(line.text, SLACK_LINKS), new Set())}`;
  return inline(parseInline(line.text, SLACK_LINKS), new Set());
}

/** `open` are the spans the text is already inside of (a heading is bold): Slack is not asked to nest one in itself. */
function inline(nodes: readonly Inline[], open: ReadonlySet<Tag>): string {
  let out = "";
  for (const n of nodes) {
    // A bare URL stays text: Slack links it itself.
    if (n.kind === "text" || n.kind === "url") out += escapeSlackText(n.kind === "text" ? n.text : n.url);
    else if (n.kind === "code") out += codeSpan(n);
    else if (n.kind === "link") out += link(n, open);
    else if (open.has(n.tag)) out += inline(n.children, open);
    else if (WORD.test(n.before) || WORD.test(n.after)) out += n.marker + inline(n.children, open) + n.marker;
    else out += MARKS[n.tag] + inline(n.children, new Set([...open, n.tag])) + MARKS[n.tag];
  }
  return out;
}

/** Slack's code spans take one backtick each side, and no backtick inside: such a span stays as written. */
function codeSpan(n: Extract<Inline, { kind: "code" }>): string {
  if (!n.code.trim()) return escapeSlackText(n.code);
  if (n.code.includes("`")) return escapeSlackText(n.source);
  return `\`${escapeSlackText(n.code)}\``;
}

function link(n: Extract<Inline, { kind: "link" }>, open: ReadonlySet<Tag>): string {
  const source = escapeSlackText(n.source);
  const url = escapeSlackText(n.url);
  // A link whose text is its URL (an autolink, or one whose text shows nothing) is the URL alone.
  const [only] = n.label;
  const out = n.label.length === 1 && only.kind === "text" && only.text === n.url ? `<${url}>` : `<${url}|${inline(n.label, open)}>`;
  // Not longer than the Markdown it stands for, which the reply was split by (a destination's spaces go out as %20).
  return out.length <= source.length ? out : source;
}
