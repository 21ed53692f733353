import { scopedMessageRef } from "../platforms/message-ref";
import type { RunJob } from "../run/job";

/**
 * The chat message a delivery call posted or edited, as its `delivery.succeeded` row's `message_ref`: a reply to the
 * bot's own answer finds the row by it, as a reply to a received message finds that one (src/platforms/delivered-reply.ts).
 * Only where the host reads replies (Telegram, Lark); `chatId:id` in a conversation another chat continues
 * (platforms/message-ref.ts). Null for any other fact.
 */
export function deliveredMessageRef(job: Pick<RunJob, "delivery" | "conversation">, data: Record<string, unknown>): string | null {
  const target = job.delivery?.target;
  const id = data.message_id;
  if (typeof id !== "string" || (target?.platform !== "telegram" && target?.platform !== "lark")) return null;
  return scopedMessageRef(target.chatId === job.conversation.conversation_id ? undefined : target.chatId, id);
}
