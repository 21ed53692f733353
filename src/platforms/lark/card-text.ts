/**
 * The words of a Lark card (`interactive`) read by id with `card_msg_content_type=user_card_content`
 * (./get-message.ts): the card JSON as its sender sent it, 1.0 (`elements`) or 2.0 (`body.elements`), as ./content.ts
 * sends the bot's own answers. Only what it says in words: its title and its `markdown`, `plain_text` and `div`
 * elements (a div's text and fields), in order; a button, an image, a column set and the like say nothing here. Without
 * that parameter Lark gives a cut-down card (for a 2.0 one, a notice to upgrade the client), read as nothing.
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
  const lines = [card.header?.title?.content ?? card.title ?? ""];
  for (const item of (card.body?.elements ?? card.elements ?? []).slice(0, MAX_ELEMENTS)) {
    const el = ElementSchema.safeParse(item).data;
    if (!el) continue;
    if (el.tag === "div") lines.push(el.text?.content ?? "", ...(el.fields ?? []).map((f) => f.text?.content ?? ""));
    else lines.push(el.content);
  }
  const text = lines.filter((l) => l.trim() !== "").join("\n");
  return text || null;
}
