/**
 * Whether a Telegram message addressed this bot (NormalizedEvent.addressed), for an agent that answers in a group only
 * what does (trigger_policy). A bot that reads every group message (an admin, or privacy mode off) gets the rest of
 * the talk too, which such an agent records and leaves unanswered.
 */
import * as z from "zod";

const EntitySchema = z.looseObject({
  type: z.string(),
  offset: z.int().nonnegative(),
  length: z.int().positive(),
  /** A `text_mention`'s user: one without a username, named by a link to them. */
  user: z.looseObject({ id: z.number() }).optional(),
});

const RepliedFromSchema = z.looseObject({
  from: z.looseObject({ id: z.number() }).optional(),
  /** The service message that opened a forum topic, which every message of the topic "replies" to: no reply the user chose. */
  forum_topic_created: z.unknown().optional(),
});

/** Telegram's rule for a bot's username: it ends in "bot". A mention of anything else never names a bot. */
export const mayNameABot = (mention: string) => /bot$/i.test(mention);

/** A reply to a message of another chat or topic names its sender by its origin (./external-reply.ts). */
const ExternalFromSchema = z.looseObject({ origin: z.looseObject({ sender_user: z.looseObject({ id: z.number() }).optional() }) });

interface Message {
  chat: { type: string };
  reply_to_message?: unknown;
  external_reply?: unknown;
}

/**
 * A private chat (the bot is the only one there to ask); a command (a bare one, or `/cmd@OurBot`: one for another bot
 * is never answered at all); a mention of the bot anywhere in the words (`@OurBot`, or a link to its user); or a reply
 * to one of its messages (`self.id`: its token's prefix), not the opening of its forum topic. Without its username
 * (getMe failed), a mention of any bot is taken for one of it, as a command then is answered rather than dropped.
 */
export function addressedOnTelegram(m: Message, words: { text: string; entities?: unknown[] } | null, self: { id?: string; username?: string | null }): boolean {
  if (m.chat.type === "private") return true;
  const replied = RepliedFromSchema.safeParse(m.reply_to_message).data;
  // A topic the bot opened (createForumTopic) is not addressed to it by every message said there; a reply to its
  // message in another topic is.
  const to = (replied?.forum_topic_created === undefined ? replied?.from : undefined) ?? ExternalFromSchema.safeParse(m.external_reply).data?.origin.sender_user;
  if (to !== undefined && self.id !== undefined && String(to.id) === self.id) return true;
  const text = words?.text ?? "";
  for (const given of words?.entities ?? []) {
    const e = EntitySchema.safeParse(given).data;
    if (!e) continue;
    if (e.type === "bot_command" && e.offset === 0) return true;
    if (e.type === "text_mention" && e.user && String(e.user.id) === self.id) return true;
    if (e.type !== "mention") continue;
    const named = text.slice(e.offset + 1, e.offset + e.length);
    if (self.username ? named.toLowerCase() === self.username.toLowerCase() : mayNameABot(named)) return true;
  }
  return false;
}
