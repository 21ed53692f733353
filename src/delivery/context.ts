import type { DeliveryPolicy } from "../agents/policy";
import { ADAPTERS } from "../platforms/registry";
import type { PlatformDelivery } from "../platforms/types";
import type { DeliveryContext } from "../protocol/context";

/**
 * ctx.delivery for a chat platform event: the real surface. Streaming is on
 * when the agent's policy asks for it and the platform edits messages in place.
 */
export function platformDeliveryContext(delivery: PlatformDelivery, policy: DeliveryPolicy): DeliveryContext {
  const adapter = ADAPTERS[delivery.target.platform];
  return {
    surface: adapter.name,
    reply_target: adapter.replyTargetView(delivery.target),
    supports_streaming: policy.streaming && adapter.surface.canEdit,
    supports_edit: adapter.surface.canEdit,
    supports_reaction: false,
    max_message_size: adapter.surface.maxMessageSize,
    platform_capabilities: { ...adapter.surface.capabilities, files: { max_bytes: adapter.surface.maxFileBytes } },
  };
}
