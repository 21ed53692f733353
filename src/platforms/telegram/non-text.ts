/**
 * Telegram messages that carry neither words nor a file a runner could read, but something a person means all the
 * same: a location or venue, a contact, a poll, a dice throw, a sticker. A runner has only text, so each reads as a
 * line of words (`📍 Location: 48.8584, 2.2945`); Telegram's own object stays in `event.data` under its field's name.
 * A story, a game, an invoice and the like stay unanswered: the bot can read nothing of them.
 */
import * as z from "zod";
import type { PlatformFile } from "../types";

const LocationSchema = z.looseObject({ latitude: z.number(), longitude: z.number(), live_period: z.number().optional() });
const VenueSchema = z.looseObject({ location: LocationSchema, title: z.string(), address: z.string() });
const ContactSchema = z.looseObject({ phone_number: z.string(), first_name: z.string(), last_name: z.string().optional() });
const PollSchema = z.looseObject({
  question: z.string(),
  options: z.array(z.looseObject({ text: z.string(), voter_count: z.number().optional() })),
  total_voter_count: z.number().optional(),
  is_closed: z.boolean().optional(),
  type: z.string().optional(),
  allows_multiple_answers: z.boolean().optional(),
});
const DiceSchema = z.looseObject({ emoji: z.string(), value: z.number() });
const StickerSchema = z.looseObject({ file_id: z.string().min(1), emoji: z.string().optional(), is_animated: z.boolean().optional(), is_video: z.boolean().optional() });

export interface NonText {
  /** What the runner reads. */
  text: string;
  /** Telegram's object, under its own field's name (`{location: {...}}`). */
  data: Record<string, unknown>;
  files: PlatformFile[];
}

const place = (l: z.infer<typeof LocationSchema>) => `${l.latitude}, ${l.longitude}`;

function pollText(p: z.infer<typeof PollSchema>): string {
  const notes = [p.allows_multiple_answers ? "multiple answers" : "", p.is_closed ? "closed" : ""].filter(Boolean);
  // Votes are shown once anyone voted: a forwarded poll's tally may be what is asked about.
  const counted = (p.total_voter_count ?? 0) > 0;
  const options = p.options.map((o) => `- ${o.text}${counted ? ` (${o.voter_count ?? 0} votes)` : ""}`);
  return [`📊 ${p.type === "quiz" ? "Quiz" : "Poll"}: ${p.question}${notes.length ? ` (${notes.join(", ")})` : ""}`, ...options].join("\n");
}

/** What a message with no words and no file says, or null when it says nothing the bot can read. */
export function nonTextOf(m: Record<string, unknown>): NonText | null {
  // A venue carries its location too (Telegram sets both): read as the venue.
  const venue = VenueSchema.safeParse(m.venue);
  if (venue.success) return { text: `📍 Location: ${place(venue.data.location)} (${[venue.data.title, venue.data.address].filter(Boolean).join(", ")})`, data: { venue: m.venue }, files: [] };
  const location = LocationSchema.safeParse(m.location);
  if (location.success) return { text: `📍 Location: ${place(location.data)}${location.data.live_period ? " (live)" : ""}`, data: { location: m.location }, files: [] };
  const contact = ContactSchema.safeParse(m.contact);
  if (contact.success) {
    const name = [contact.data.first_name, contact.data.last_name].filter(Boolean).join(" ");
    return { text: `👤 Contact: ${name}, ${contact.data.phone_number}`, data: { contact: m.contact }, files: [] };
  }
  const poll = PollSchema.safeParse(m.poll);
  if (poll.success) return { text: pollText(poll.data), data: { poll: m.poll }, files: [] };
  const dice = DiceSchema.safeParse(m.dice);
  if (dice.success) return { text: `${dice.data.emoji} Dice: ${dice.data.value}`, data: { dice: m.dice }, files: [] };
  const sticker = StickerSchema.safeParse(m.sticker);
  if (sticker.success) {
    // Its emoji is what its sender meant. A static sticker is a WebP picture a model can look at too; an animated
    // (Lottie .tgs) or video (.webm) one is not an image any model reads, so only its emoji goes.
    const still = !sticker.data.is_animated && !sticker.data.is_video;
    const files: PlatformFile[] = still ? [{ ref: sticker.data.file_id, name: "sticker.webp", mimeType: "image/webp", artifactType: "image" }] : [];
    return { text: sticker.data.emoji ? `Sticker: ${sticker.data.emoji}` : "Sticker", data: { sticker: m.sticker }, files };
  }
  return null;
}
