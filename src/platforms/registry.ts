import { discord } from "./discord";
import { lark } from "./lark";
import { slack } from "./slack";
import { telegram } from "./telegram";
import type { DeliveryTarget, PlatformAdapter, PlatformName, Surface } from "./types";

/**
 * Every platform the host speaks, by the name used in routes and bot records.
 * The credential type is erased here; it is sound because a bot's stored
 * credentials are parsed with its own adapter's schema before any use (stores/bots).
 */
export const ADAPTERS: Record<PlatformName, PlatformAdapter> = {
  telegram: telegram as unknown as PlatformAdapter,
  slack: slack as unknown as PlatformAdapter,
  lark: lark as unknown as PlatformAdapter,
  discord: discord as unknown as PlatformAdapter,
};

/** The surface one reply goes to: its platform's, less what that target cannot do (PlatformAdapter.surfaceAt). */
export function surfaceAt(target: DeliveryTarget): Surface {
  const adapter = ADAPTERS[target.platform];
  return { ...adapter.surface, ...adapter.surfaceAt?.(target) };
}
