import { artifactExpiry, artifactR2Key } from "../artifacts/policy";
import type { Db } from "../db/client";
import type { Config } from "../env";
import { artifact } from "../db/schema";
import { mayHaveApplied } from "../db/executor";
import { sha256Hex } from "../lib/crypto";
import { newId } from "../lib/ids";
import type { ArtifactRef } from "../protocol/common";

export interface ToolResultOwner {
  conversationKey: string;
  conversationId: string | null;
  runId: string;
  runnerId: string;
}

/**
 * A tool result too large to return inline: the JSON goes to R2 and an
 * artifact row (owned by the run and its conversation) makes it readable
 * through `artifact.metadata` / `artifact.read`.
 */
export async function storeToolResult(
  deps: { db: Db; artifacts: R2Bucket; config: Config },
  owner: ToolResultOwner,
  call: { toolName: string; toolCallId: string },
  bytes: Uint8Array,
): Promise<ArtifactRef & { artifact_type: string }> {
  const artifactId = newId("art");
  const r2Key = artifactR2Key(artifactId);
  const mimeType = "application/json";
  const name = `${call.toolName}-result.json`;
  const sha256 = await sha256Hex(bytes);
  await deps.artifacts.put(r2Key, bytes, { httpMetadata: { contentType: mimeType } });
  const row = deps.db
    .insert(artifact)
    .values({
      artifactId,
      artifactType: "tool_result",
      mimeType,
      name,
      sizeBytes: bytes.length,
      sha256,
      source: "tool",
      conversationKey: owner.conversationKey,
      conversationId: owner.conversationId,
      runId: owner.runId,
      runnerId: owner.runnerId,
      r2Key,
      metadataJson: JSON.stringify({ tool_name: call.toolName, tool_call_id: call.toolCallId }),
      createdAt: Date.now(),
      expiresAt: artifactExpiry(deps.config, Date.now()),
    });
  await row.run().catch(async (err: unknown) => {
    // Refused, no row names the blob: removed (unanswered, the row may exist and name it: kept).
    if (!mayHaveApplied(err)) await deps.artifacts.delete(r2Key).catch(() => {});
    throw err;
  });
  return { artifact_id: artifactId, artifact_type: "tool_result", mime_type: mimeType, name, size_bytes: bytes.length };
}
