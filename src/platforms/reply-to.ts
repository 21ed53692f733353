import type { AgentEventContext } from "../protocol/context";
import type { DeliveryTarget } from "./types";

/**
 * A run's reply target made to answer another message of the same chat (`event`, of the same platform): where a
 * reply quotes its message (Telegram, Lark), it quotes that one. Slack and Discord answer the conversation (a thread,
 * an interaction) whatever message in it is answered, and an event of another source (an API event) names none.
 */
export function replyingTo(target: DeliveryTarget, event: AgentEventContext): DeliveryTarget {
  const id = event.data.message_id;
  if (event.source !== target.platform) return target;
  if (target.platform === "telegram" && typeof id === "number") return { ...target, replyToMessageId: id };
  if (target.platform === "lark" && typeof id === "string") return { ...target, replyToMessageId: id };
  return target;
}
