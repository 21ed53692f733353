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

export type ArtifactAccess = "granted" | "other_conversation" | "expired";

/** An artifact is visible to its conversation, or to the run that made it, until it expires. */
export function artifactAccess(
  row: { conversationKey: string | null; runId: string | null; expiresAt: number | null },
  owner: ArtifactOwner,
  now: number,
): ArtifactAccess {
  const mine = row.conversationKey === owner.conversationKey || (owner.runId != null && row.runId === owner.runId);
  if (!mine) return "other_conversation";
  if (row.expiresAt !== null && row.expiresAt <= now) return "expired";
  return "granted";
}
