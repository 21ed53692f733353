/**
 * `artifact.upload`: the request body streamed to R2 with its declared length,
 * hashed on the way through, never held whole in memory.
 */
import type { Db } from "../db/client";
import type { Config } from "../env";
import { toHex } from "../lib/crypto";
import { newId } from "../lib/ids";
import type { ArtifactUploadQuery } from "../protocol/host-api";
import type { ArtifactMetadata } from "../protocol/host-api-results";
import { artifactsStore, toArtifactMetadata, type ArtifactRow } from "../stores/artifacts";
import type { UploadGrant } from "../host-api/upload";
import { artifactExpiry, artifactR2Key, artifactTypeOf } from "./policy";

/** The body held fewer bytes than its Content-Length said. */
export class TruncatedUploadError extends Error {
  override readonly name = "TruncatedUploadError";
}

/** The run ended (cancelled, failed) while its upload arrived: its token no longer holds, and nothing is kept. */
export class RunEndedDuringUploadError extends Error {
  override readonly name = "RunEndedDuringUploadError";
}

/** The run's deadline passed while the body was still arriving. */
export class UploadDeadlineError extends Error {
  override readonly name = "UploadDeadlineError";
}

export async function storeUpload(
  deps: { db: Db; bucket: R2Bucket; config: Config },
  grant: UploadGrant,
  query: ArtifactUploadQuery,
  body: ReadableStream<Uint8Array> | null,
  signal?: AbortSignal,
  /** Asked once the blob is stored, before it is recorded: whether the run is still active (§8: its token holds only then). */
  stillActive?: () => Promise<boolean>,
): Promise<ArtifactMetadata> {
  const { length } = grant;
  const artifactId = newId("art");
  const r2Key = artifactR2Key(artifactId);
  const mimeType = query.mime_type ?? null;

  // SHA-256 fed chunk by chunk; R2 pulls at its own pace, so backpressure reaches the client.
  const digest = new crypto.DigestStream("SHA-256");
  const hashWriter = digest.getWriter();
  let received = 0;
  const hashing = new TransformStream<Uint8Array, Uint8Array>({
    start(out) {
      // Erroring the stream fails R2's put and cancels the request body.
      signal?.addEventListener("abort", () => out.error(signal.reason), { once: true });
    },
    async transform(chunk, out) {
      received += chunk.length;
      await hashWriter.write(chunk);
      out.enqueue(chunk);
    },
    flush: () => hashWriter.close(),
  });
  // No body is an empty stream: one path for every length.
  const source = body ?? new ReadableStream<Uint8Array>({ start: (c) => c.close() });
  try {
    // R2 needs a known length: FixedLengthStream carries it, and fails if the body disagrees.
    const content = source.pipeThrough(hashing).pipeThrough(new FixedLengthStream(length));
    await deps.bucket.put(r2Key, content, { httpMetadata: mimeType ? { contentType: mimeType } : undefined });
  } catch (err) {
    if (signal?.aborted) throw new UploadDeadlineError(`the run's deadline passed after ${received} of ${length} bytes`, { cause: err });
    if (received < length) throw new TruncatedUploadError(`the body ended after ${received} of ${length} bytes`, { cause: err });
    throw err;
  }

  if (stillActive && !(await stillActive())) {
    await deps.bucket.delete(r2Key);
    throw new RunEndedDuringUploadError("the run ended while its upload arrived; nothing was kept");
  }

  const now = Date.now();
  const row: ArtifactRow = {
    artifactId,
    artifactType: query.artifact_type ?? artifactTypeOf(mimeType),
    mimeType,
    name: query.name ?? null,
    sizeBytes: length,
    sha256: toHex(await digest.digest),
    source: "upload",
    conversationKey: grant.conversationKey,
    conversationId: grant.conversationId,
    runId: grant.runId,
    runnerId: grant.runnerId,
    r2Key,
    metadataJson: "{}",
    createdAt: now,
    expiresAt: artifactExpiry(deps.config, now),
  };
  try {
    await artifactsStore(deps.db).insertStatement(row);
  } catch (err) {
    // No row will ever name this blob.
    await deps.bucket.delete(r2Key);
    throw err;
  }
  return toArtifactMetadata(row);
}
