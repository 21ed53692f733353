import { scopedMessageRef } from "../platforms/message-ref";
import type { RunJob } from "../run/job";

/** A Slack message's `ts`, as a thread names its parent. */
const SLACK_TS = /^\d+\.\d+$/;

/**
 * The chat message a delivery call posted or edited, as its `delivery.succeeded` row's `message_ref`: a reply to the
 * bot's own answer finds the row by it, as a reply to a received message finds that one (src/platforms/delivered-reply.ts).
 * Only where the host reads replies (Telegram, Lark, Slack: its `ts`, as a received message's is recorded); `chatId:id`
 * in a conversation another chat continues (platforms/message-ref.ts). Null for any other fact.
 */
export function deliveredMessageRef(job: Pick<RunJob, "delivery" | "conversation">, data: Record<string, unknown>, chatOf: (messageId: string) => string | undefined = () => undefined): string | null {
  const target = job.delivery?.target;
  const id = data.message_id;
  if (typeof id !== "string" || !target || (target.platform !== "telegram" && target.platform !== "lark" && target.platform !== "slack")) return null;
  // A Slack file's id, a response_url post's or an ephemeral one's is no message a reply can name: no index entry.
  if (target.platform === "slack" && !SLACK_TS.test(id)) return null;
  // The chat it was posted in (Messenger.chatOf): a group upgraded mid-reply took the rest of it in its supergroup.
  const chat = chatOf(id) ?? (target.platform === "slack" ? target.channel : target.chatId);
  return scopedMessageRef(chat === job.conversation.conversation_id ? undefined : chat, id);
}
