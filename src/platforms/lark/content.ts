/**
 * What a Lark send or edit carries for a text: its `msg_type` and `content`. With `format: markdown` an answer that
 * will be edited (a streamed one) is a card JSON 2.0 whose `markdown` element renders it (./markdown.ts), every edit
 * the same kind of card (a card's schema stays what it was sent as), and one sent once is that card when its Markdown
 * renders to anything but its text, a text message otherwise. A `post`'s `md` tag is not used: it takes no code span
 * or heading, reads `~x~` as underline, and documents no escapes. With `format: plain` (or the text refused as
 * rendered) it shows as it is: a text message, or a card whose element is `plain_text`.
 */
import type { TextFormat } from "../types";
import { inertMentions, larkMarkdown } from "./markdown";

export interface LarkContent {
  msgType: "text" | "interactive";
  content: string;
  /** The text's Markdown rendered: what Lark refuses of it is the rendering's, and the text may go as it is. */
  rendered: boolean;
}

/** A card JSON 1.0 whose one element is the text, shown exactly as given (plain_text), updatable by patch. */
const plainCard = (text: string) => JSON.stringify({ config: { wide_screen_mode: true, update_multi: true }, elements: [{ tag: "div", text: { tag: "plain_text", content: text } }] });

/** A card JSON 2.0 (Lark clients from 7.20) of one element, updatable by patch; 2.0 refuses attributes it does not know. */
const card2 = (element: Record<string, unknown>) => JSON.stringify({ schema: "2.0", config: { update_multi: true }, body: { elements: [element] } });

/**
 * Room for the rendered Markdown in a request Lark caps at 30 KB, counted as it travels (escaped twice: the card is a
 * JSON string inside the JSON body). A reply's part is at most 9,000 characters, but its escapes (`&#42;` for `*`)
 * can make it several times that: past the room it goes as it is.
 */
const MARKDOWN_MAX_BYTES = 28_000;
const fits = (markdown: string) => new TextEncoder().encode(JSON.stringify(JSON.stringify(markdown))).length <= MARKDOWN_MAX_BYTES;

export function larkContent(text: string, opts: { editable: boolean; format: TextFormat; asIs: boolean }): LarkContent {
  if (opts.format === "plain") {
    return opts.editable ? { msgType: "interactive", content: plainCard(text), rendered: false } : { msgType: "text", content: JSON.stringify({ text: inertMentions(text) }), rendered: false };
  }
  const rendered = opts.asIs ? null : larkMarkdown(text);
  const markdown = rendered && fits(rendered.content) ? rendered : null;
  if (markdown && (opts.editable || markdown.formatted)) return { msgType: "interactive", content: card2({ tag: "markdown", content: markdown.content }), rendered: true };
  if (opts.editable) return { msgType: "interactive", content: card2({ tag: "div", text: { tag: "plain_text", content: text } }), rendered: false };
  return { msgType: "text", content: JSON.stringify({ text: inertMentions(text) }), rendered: false };
}
