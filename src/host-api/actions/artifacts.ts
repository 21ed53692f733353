import { artifactAccess } from "../../artifacts/policy";
import { bytesToBase64 } from "../../lib/base64";
import { artifactsStore, toArtifactMetadata, type ArtifactRow } from "../../stores/artifacts";
import { ApiError, denied } from "../errors";
import type { ActionContext, ActionTable, Handler } from "./context";

/** The artifact if this run may see it: its conversation's or its own, not another audience's, and not expired. */
export async function visibleArtifact(ctx: Pick<ActionContext, "db" | "snapshot">, artifactId: string): Promise<ArtifactRow> {
  const { conversationKey, runId, privateAudience: audience } = ctx.snapshot;
  const [row] = await artifactsStore(ctx.db).readBy([artifactId], { conversationKey, runId, audience });
  if (!row) throw new ApiError("not_found", `artifact ${artifactId} not found`);
  const access = artifactAccess(row, { conversationKey, runId }, Date.now());
  if (access === "other_conversation") throw denied("artifact of another conversation is not readable by this run", { artifact_id: artifactId });
  // A 403 as event.get answers for the event it came with (README "Who sees what in a group chat").
  if (access === "other_audience") throw denied("artifact private to another user of this conversation is not readable by this run", { artifact_id: artifactId });
  if (access === "expired") throw new ApiError("not_found", `artifact ${artifactId} has expired`);
  return row;
}

/**
 * A tool result too large to inline comes back as `result_ref` (an artifact of the calling run): the run
 * that called the tool reads it even without the artifact_read API, or the result it paid for is unreachable.
 */
export async function readsOwnToolResult(ctx: Pick<ActionContext, "db" | "snapshot">, action: string, params: Record<string, unknown>): Promise<boolean> {
  if ((action !== "artifact.read" && action !== "artifact.metadata") || typeof params.artifact_id !== "string") return false;
  // Granted the API, the run reads it through the usual gate: no lookup here.
  if (ctx.snapshot.availableApis[action === "artifact.read" ? "artifact_read" : "artifact_metadata"]) return false;
  const row = await artifactsStore(ctx.db).get(params.artifact_id);
  return row?.source === "tool" && row.runId === ctx.snapshot.runId;
}

const artifactMetadata: Handler<"artifact.metadata"> = async (ctx, p) => toArtifactMetadata(await visibleArtifact(ctx, p.artifact_id));

/** One window of the bytes, through an R2 range read: responses stay ≤ 1 MiB of content whatever the artifact size. */
const artifactRead: Handler<"artifact.read"> = async (ctx, p) => {
  const row = await visibleArtifact(ctx, p.artifact_id);
  const answer = (bytes: Uint8Array, size: number) => ({
    artifact_id: row.artifactId,
    mime_type: row.mimeType ?? undefined,
    size_bytes: size,
    offset: p.offset,
    length: bytes.length,
    content_base64: bytesToBase64(bytes),
    has_more: p.offset + bytes.length < size,
  });
  const known = row.sizeBytes;
  if (known !== null && p.offset >= known) return answer(new Uint8Array(), known);
  const length = known === null ? p.length : Math.min(p.length, known - p.offset);
  const object = await ctx.artifacts.get(row.r2Key, { range: { offset: p.offset, length } });
  if (!object) throw new ApiError("not_found", `artifact ${p.artifact_id} has no stored content`);
  return answer(new Uint8Array(await object.arrayBuffer()), object.size);
};

export const artifactActions: ActionTable = {
  "artifact.metadata": artifactMetadata,
  "artifact.read": artifactRead,
};
