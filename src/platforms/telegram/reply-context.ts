/**
 * What a Telegram message replies to, for its runner (`event.data.reply_to`). Telegram gives the replied message whole
 * (`reply_to_message`), and in a group the bot has mostly never received it: with privacy mode (the default) it is
 * sent only what is addressed to it, so "@OurBot translate this" in reply to someone's message would reach the runner
 * without "this", and no history holds it.
 */
import * as z from "zod";
import { actorOf, chatActorOf, SenderChatSchema, UserSchema } from "./actor";
import { withLinkTargets } from "./link-targets";

const RepliedSchema = z.looseObject({
  message_id: z.number(),
  from: UserSchema.optional(),
  sender_chat: SenderChatSchema.optional(),
  text: z.string().optional(),
  entities: z.array(z.unknown()).optional(),
  caption: z.string().optional(),
  caption_entities: z.array(z.unknown()).optional(),
  /** The service message that opened a forum topic: every message of the topic "replies" to it. */
  forum_topic_created: z.unknown().optional(),
});

const QuoteSchema = z.looseObject({ text: z.string() });

export interface ReplyContext {
  message_id: number;
  /** Who sent it, as a message's actor reads (a chat speaking as itself is that chat). */
  actor: { actor_type: string; actor_id: string; actor_name: string | null } | null;
  /** Its words (text or caption), link targets after their labels as a message's input has them; null with none. */
  text: string | null;
  /** The part of it the user quoted, if they picked one. */
  quote: string | null;
}

/** The message `m` replies to, or null: none, or only the root of its forum topic (no reply the user chose). */
export function replyContextOf(m: { reply_to_message?: unknown; quote?: unknown }): ReplyContext | null {
  const r = RepliedSchema.safeParse(m.reply_to_message);
  if (!r.success || r.data.forum_topic_created !== undefined) return null;
  const replied = r.data;
  const sender = replied.sender_chat ? chatActorOf(replied.sender_chat) : actorOf(replied.from);
  const words = replied.text !== undefined ? withLinkTargets(replied.text, replied.entities) : replied.caption !== undefined ? withLinkTargets(replied.caption, replied.caption_entities) : null;
  return {
    message_id: replied.message_id,
    actor: sender && { actor_type: sender.actor_type, actor_id: sender.actor_id, actor_name: sender.actor_name },
    text: words,
    quote: QuoteSchema.safeParse(m.quote).data?.text ?? null,
  };
}
