/**
 * The words of a Lark card (`interactive`) read by id with `card_msg_content_type=user_card_content`
 * (./get-message.ts): the card JSON as its sender sent it, 1.0 (`elements`) or 2.0 (`body.elements`), as ./content.ts
 * sends the bot's own answers. Only what it says in words: its title and its `markdown`, `plain_text` and `div`
 * elements (a div's text and fields), in order; a button, an image, a column set and the like say nothing here. Without
 * that parameter Lark gives a cut-down card (for a 2.0 one, a notice to upgrade the client), read as nothing. Markdown
 * reads as written, its escapes undone (`unescaped`).
 */
import * as z from "zod";

/** The elements read at most: a card is capped at 30 KB, but its words are cut further by whoever shows them. */
const MAX_ELEMENTS = 50;

const TextSchema = z.looseObject({ tag: z.enum(["plain_text", "lark_md"]), content: z.string() });
const ElementSchema = z.union([
  z.looseObject({ tag: z.enum(["markdown", "plain_text", "lark_md"]), content: z.string() }),
  z.looseObject({ tag: z.literal("div"), text: TextSchema.optional(), fields: z.array(z.looseObject({ text: TextSchema.optional() })).optional() }),
]);
const CardSchema = z.looseObject({
  /** The cut-down card's title (Lark's "receive message content"), where the card as sent has `header.title`. */
  title: z.string().nullish(),
  header: z.looseObject({ title: TextSchema.optional() }).optional(),
  elements: z.array(z.unknown()).optional(),
  body: z.looseObject({ elements: z.array(z.unknown()) }).optional(),
});

/**
 * Markdown as Lark shows it: a character reference (`&#42;`, `&#x2A;`, `&nbsp;`, `&amp;`...) reads as its character, as
 * the host escapes what Lark's Markdown would act on in its own answers (./markdown.ts: `snake&#95;case`, an indent
 * of `&nbsp;`). Any other `&` stays as written.
 */
const NAMED: Record<string, string> = { nbsp: " ", amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" };
const unescaped = (md: string) =>
  md.replace(/&(?:#(\d{1,7})|#[xX]([0-9a-fA-F]{1,6})|(nbsp|amp|lt|gt|quot|apos));/g, (ref, dec?: string, hex?: string, name?: string) => {
    const code = dec !== undefined ? Number(dec) : hex !== undefined ? parseInt(hex, 16) : -1;
    if (name !== undefined) return NAMED[name];
    return code > 0 && code <= 0x10ffff && (code < 0xd800 || code > 0xdfff) ? String.fromCodePoint(code) : ref;
  });

/** A text object's words: `lark_md` as Markdown is shown, `plain_text` as it is. */
const wordsOf = (t: z.infer<typeof TextSchema> | undefined) => (t === undefined ? "" : t.tag === "lark_md" ? unescaped(t.content) : t.content);

/** What the card says, one element a line; null when it says nothing in words (or is no card JSON at all). */
export function cardText(raw: string): string | null {
  let given: unknown;
  try {
    given = JSON.parse(raw);
  } catch {
    return null;
  }
  const card = CardSchema.safeParse(given).data;
  if (!card) return null;
  const lines = [card.header?.title ? wordsOf(card.header.title) : (card.title ?? "")];
  for (const item of (card.body?.elements ?? card.elements ?? []).slice(0, MAX_ELEMENTS)) {
    const el = ElementSchema.safeParse(item).data;
    if (!el) continue;
    if (el.tag === "div") lines.push(wordsOf(el.text), ...(el.fields ?? []).map((f) => wordsOf(f.text)));
    else lines.push(el.tag === "plain_text" ? el.content : unescaped(el.content));
  }
  const text = lines.filter((l) => l.trim() !== "").join("\n");
  return text || null;
}
