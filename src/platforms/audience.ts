import type { DeliveryTarget } from "./types";

/**
 * Whose eyes a chat event and its answer are for (README "Who sees what in a group chat"): null when everyone in the
 * chat sees them, else a key naming one user and how they alone see it. On Discord: a press on an ephemeral message
 * (answered ephemerally), and an interaction of an app installed only to the user (the user's own app, whose answer
 * continues in a DM with them once the interaction's token has expired). On Slack: a press on an ephemeral message
 * (answered ephemerally, slack/ephemeral.ts). Two events of different
 * audiences are never answered by one run, neither cancels the other's answer, and a run reads nothing of the history
 * private to another audience than its own.
 */
export function privateAudienceOf(target: DeliveryTarget | null | undefined): string | null {
  // Such a press always names its user: one that does not is recorded unhandled (slack/interactivity.ts).
  if (target?.platform === "slack") return target.ephemeral ? `slack_ephemeral:${target.userId ?? "unnamed"}` : null;
  if (target?.platform !== "discord") return null;
  const kind = target.ephemeral ? "discord_ephemeral" : target.followupLimit !== undefined ? "discord_user_install" : null;
  if (!kind) return null;
  // No user named (a target stored by an earlier release): this interaction's alone, the same as no other's.
  return `${kind}:${target.userId ?? `interaction_${target.interactionId}`}`;
}

/** The EventLog metadata key that marks an event private to one audience (a host key: an API event may not send it). */
export const PRIVATE_AUDIENCE_KEY = "private_audience";

/** The metadata a chat event is recorded with: its audience when private. */
export const audienceMetadata = (target: DeliveryTarget | null | undefined): Record<string, unknown> => {
  const audience = privateAudienceOf(target);
  return audience === null ? {} : { [PRIVATE_AUDIENCE_KEY]: audience };
};
