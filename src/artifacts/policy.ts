/**
 * The rules every artifact path shares: where bytes live in R2, how long
 * they live, and who may see them.
 */
import type { Config } from "../env";

/** Where an artifact's bytes live in the ARTIFACTS bucket. */
export const artifactR2Key = (artifactId: string) => `artifacts/${artifactId}`;

/** When an artifact stored now expires; null when ARTIFACT_TTL_SECONDS is 0 (kept forever). */
export function artifactExpiry(config: Config, now: number): number | null {
  return config.ARTIFACT_TTL_SECONDS > 0 ? now + config.ARTIFACT_TTL_SECONDS * 1000 : null;
}

/** A sensible artifact_type when the caller gave none. */
export function artifactTypeOf(mimeType: string | null | undefined): string {
  const top = (mimeType ?? "").split("/")[0].trim().toLowerCase();
  return top === "image" || top === "audio" || top === "video" ? top : "file";
}

export interface ArtifactOwner {
  conversationKey: string;
  runId?: string | null;
}

/** A run reading artifacts: its conversation, its id, and whose eyes alone its answer is for (null: the whole chat's). */
export interface ArtifactReader extends ArtifactOwner {
  runId: string;
  audience: string | null;
}

export type ArtifactAccess = "granted" | "other_conversation" | "other_audience" | "expired";

/**
 * An artifact is visible to its conversation, or to the run that made it, until it expires; and, as its history is
 * (README "Who sees what in a group chat"), not to a run answering other eyes than those of its event or run
 * (`otherAudience`, read with the row: stores/artifacts.ts readBy). Such a one is refused whether or not it has
 * expired, so the refusal tells nothing of it.
 */
export function artifactAccess(
  row: { conversationKey: string | null; runId: string | null; expiresAt: number | null; otherAudience?: boolean },
  owner: ArtifactOwner,
  now: number,
): ArtifactAccess {
  const mine = row.conversationKey === owner.conversationKey || (owner.runId != null && row.runId === owner.runId);
  if (!mine) return "other_conversation";
  if (row.otherAudience) return "other_audience";
  if (row.expiresAt !== null && row.expiresAt <= now) return "expired";
  return "granted";
}
