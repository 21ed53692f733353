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
  // What this target can do (a Slack answer only one user sees takes no edit and no file), not the whole platform.
  const surface = surfaceAt(delivery.target);
  return {
    surface: adapter.name,
    reply_target: adapter.replyTargetView(delivery.target),
    supports_streaming: policy.streaming && surface.canEdit,
    supports_edit: surface.canEdit,
    supports_reaction: false,
    max_message_size: surface.maxMessageSize,
    platform_capabilities: { ...surface.capabilities, files: { max_bytes: surface.maxFileBytes } },
  };
}
