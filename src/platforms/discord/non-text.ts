/**
 * What a Discord message says without words of its own: a poll, read as its question and answers (the votes once
 * anyone voted), and stickers, each by its name, as Telegram's read (../telegram/non-text.ts). Read leniently: a shape
 * this host does not know reads as nothing, never a reason to drop the interaction.
 */
import * as z from "zod";

const text = z.string().nullish().catch(null);
const PollSchema = z.looseObject({
  question: z.looseObject({ text }),
  answers: z.array(z.looseObject({ answer_id: z.number().nullish().catch(null), poll_media: z.looseObject({ text, emoji: z.looseObject({ id: text, name: text }).nullish().catch(null) }).nullish().catch(null) })),
  allow_multiselect: z.boolean().nullish().catch(null),
  results: z.looseObject({ is_finalized: z.boolean().nullish().catch(null), answer_counts: z.array(z.looseObject({ id: z.number(), count: z.number() })).nullish().catch(null) }).nullish().catch(null),
});
const StickerSchema = z.looseObject({ name: z.string().min(1) });

type Media = NonNullable<z.infer<typeof PollSchema>["answers"][number]["poll_media"]>;
/** An answer's words, else its emoji: a custom one by its name, as Discord writes it (`:party:`). */
const mediaText = (m: Media | null | undefined) => m?.text || (m?.emoji?.name ? (m.emoji.id ? `:${m.emoji.name}:` : m.emoji.name) : "");

/** `📊 Poll: Lunch? (multiple answers, closed)` and a `- answer` line each, `(n votes)` after once anyone voted; "" when it is none. */
export function pollText(raw: unknown): string {
  const poll = PollSchema.safeParse(raw);
  if (!poll.success || !poll.data.question.text) return "";
  const { question, answers, allow_multiselect, results } = poll.data;
  const counts = new Map((results?.answer_counts ?? []).map((c) => [c.id, c.count]));
  // Votes are shown once anyone voted: what the poll came to may be what is asked about.
  const counted = [...counts.values()].some((n) => n > 0);
  const notes = [allow_multiselect ? "multiple answers" : "", results?.is_finalized ? "closed" : ""].filter(Boolean);
  const lines = answers.map((a) => `- ${mediaText(a.poll_media)}${counted ? ` (${counts.get(a.answer_id ?? -1) ?? 0} votes)` : ""}`);
  return [`📊 Poll: ${question.text}${notes.length ? ` (${notes.join(", ")})` : ""}`, ...lines].join("\n");
}

/** `Sticker: Wave`, a line for each sticker (a message has up to three); "" for none. */
export function stickersText(raw: readonly unknown[] | null | undefined): string {
  return (raw ?? [])
    .flatMap((s) => {
      const sticker = StickerSchema.safeParse(s);
      return sticker.success ? [`Sticker: ${sticker.data.name}`] : [];
    })
    .join("\n");
}
