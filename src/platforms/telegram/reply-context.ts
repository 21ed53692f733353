/**
 * What a Telegram message replies to (`event.data.reply_to`, ../reply-context.ts). Telegram gives the replied message
 * whole (`reply_to_message`), its files too: they are downloaded with the message's own.
 */
import * as z from "zod";
import type { PlatformFile } from "../types";
import type { ReplyContext } from "../reply-context";
import { actorOf, chatActorOf, SenderChatSchema, UserSchema } from "./actor";
import { FileFieldsSchema, filesOf } from "./files";
import { withLinkTargets } from "./link-targets";
import { nonTextOf } from "./non-text";
import { externalReplyOf } from "./external-reply";

const RepliedSchema = FileFieldsSchema.extend({
  message_id: z.number(),
  from: UserSchema.optional(),
  sender_chat: SenderChatSchema.optional(),
  text: z.string().optional(),
  entities: z.array(z.unknown()).optional(),
  caption: z.string().optional(),
  caption_entities: z.array(z.unknown()).optional(),
  /** Set once it was edited: its photo or file may have been replaced since the bot stored it. */
  edit_date: z.number().optional(),
});

const QuoteSchema = z.looseObject({ text: z.string() });

/** A message's reply and its place, as far as telling a forum topic's opening needs. */
interface InTopic {
  reply_to_message?: { message_id: number; forum_topic_created?: unknown };
  message_thread_id?: number;
  is_topic_message?: boolean;
}

/**
 * Whether the message `m` replies to is only the opening of its forum topic, which Telegram names as every topic
 * message's (no reply the user chose): the service message that created the topic, whose id is the topic's.
 */
export function repliesToTopicOpening(m: InTopic): boolean {
  const r = m.reply_to_message;
  return r !== undefined && (r.forum_topic_created !== undefined || (m.is_topic_message === true && r.message_id === m.message_thread_id));
}

/**
 * The message `m` replies to and its files, or null: none, or only the opening of its forum topic. One of another
 * chat or topic is named by `external_reply` (./external-reply.ts).
 */
export function repliedOf(m: InTopic & { external_reply?: unknown; quote?: unknown }): { context: ReplyContext; files: PlatformFile[] } | null {
  const r = RepliedSchema.safeParse(m.reply_to_message);
  if (!r.success || repliesToTopicOpening(m)) return externalReplyOf(m);
  const replied = r.data;
  const sender = replied.sender_chat ? chatActorOf(replied.sender_chat) : actorOf(replied.from);
  const words = replied.text !== undefined ? withLinkTargets(replied.text, replied.entities) : replied.caption !== undefined ? withLinkTargets(replied.caption, replied.caption_entities) : null;
  const attached = filesOf(replied);
  // A location, a poll... reads as it does received ("which one won?" in reply to a poll).
  const other = words === null && attached.length === 0 ? nonTextOf(replied) : null;
  const context: ReplyContext = {
    message_id: replied.message_id,
    actor: sender && { actor_type: sender.actor_type, actor_id: sender.actor_id, actor_name: sender.actor_name },
    text: words ?? other?.text ?? null,
    quote: QuoteSchema.safeParse(m.quote).data?.text ?? null,
    attachments: [],
    unavailable: null,
  };
  // Edited since it was received: fetched as Telegram gives it now, not as stored then (its edit_date does not say
  // whether a photo was replaced or a caption fixed).
  const fresh = replied.edit_date !== undefined ? { fetchAnew: true as const } : {};
  return { context, files: (other?.files ?? attached).map((file) => ({ ...file, repliedMessageId: String(replied.message_id), ...fresh })) };
}
