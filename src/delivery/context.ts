import type { DeliveryPolicy } from "../agents/policy";
import { ADAPTERS, surfaceAt } from "../platforms/registry";
import type { PlatformDelivery } from "../platforms/types";
import type { DeliveryContext } from "../protocol/context";

/**
 * ctx.delivery for a chat platform event: the real surface. Streaming is on
 * when the agent's policy asks for it and the reply's messages can be edited in place.
 */
export function platformDeliveryContext(delivery: PlatformDelivery, policy: DeliveryPolicy): DeliveryContext {
  const adapter = ADAPTERS[delivery.target.platform];
  const { canEdit } = surfaceAt(delivery.target);
  return {
    surface: adapter.name,
    reply_target: adapter.replyTargetView(delivery.target),
    supports_streaming: policy.streaming && canEdit,
    supports_edit: canEdit,
    supports_reaction: false,
    max_message_size: adapter.surface.maxMessageSize,
    platform_capabilities: { ...adapter.surface.capabilities, files: { max_bytes: adapter.surface.maxFileBytes } },
  };
}
