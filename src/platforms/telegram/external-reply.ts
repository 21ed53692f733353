/**
 * A reply to a message of another chat or forum topic ("Reply in another chat", a quote across topics). Telegram then
 * gives no `reply_to_message` but `external_reply`: the message's files and who sent it (`origin`), never its words
 * (only the part the user quoted, `quote`), and its id only when that chat is a supergroup or a channel.
 */
import * as z from "zod";
import type { PlatformFile } from "../types";
import type { ReplyContext } from "../reply-context";
import { actorOf, chatActorOf, SenderChatSchema, UserSchema } from "./actor";
import { FileFieldsSchema, filesOf } from "./files";
import { nonTextOf } from "./non-text";

/** MessageOrigin: `user` (sender_user), `hidden_user` (a name only), `chat` (sender_chat), `channel` (chat). */
const OriginSchema = z.looseObject({ sender_user: UserSchema.optional(), sender_chat: SenderChatSchema.optional(), chat: SenderChatSchema.optional() });

/** `chat` and `message_id` are given for a supergroup's or a channel's message only. */
const ExternalReplySchema = FileFieldsSchema.extend({
  origin: OriginSchema,
  chat: z.looseObject({ id: z.number(), title: z.string().optional() }).optional(),
  message_id: z.number().optional(),
});

const QuoteSchema = z.looseObject({ text: z.string() });

/** Who sent it, as a message's actor reads; null for a user who hides their account from forwards. */
function originActor(origin: z.infer<typeof OriginSchema>) {
  const chat = origin.sender_chat ?? origin.chat;
  return origin.sender_user ? actorOf(origin.sender_user) : chat ? chatActorOf(chat) : null;
}

/** The message `m` replies to in another chat or topic, and its files, or null when it replies to none there. */
export function externalReplyOf(m: { external_reply?: unknown; quote?: unknown }): { context: ReplyContext; files: PlatformFile[] } | null {
  const r = ExternalReplySchema.safeParse(m.external_reply);
  if (!r.success) return null;
  const sender = originActor(r.data.origin);
  const attached = filesOf(r.data);
  const other = attached.length === 0 ? nonTextOf(r.data) : null;
  const context: ReplyContext = {
    message_id: r.data.message_id ?? null,
    actor: sender && { actor_type: sender.actor_type, actor_id: sender.actor_id, actor_name: sender.actor_name },
    text: other?.text ?? null,
    quote: QuoteSchema.safeParse(m.quote).data?.text ?? null,
    attachments: [],
    unavailable: null,
    // What tells the runner its id is another chat's (or, from another topic, this chat's).
    chat: r.data.chat ? { chat_id: String(r.data.chat.id), chat_title: r.data.chat.title ?? null } : null,
  };
  // Its id numbers a message of another chat (or none): never one the bot received here (../replied.ts).
  const files = (other?.files ?? attached).map((file) => ({ ...file, repliedMessageId: String(r.data.message_id ?? ""), fetchAnew: true as const }));
  return { context, files };
}
