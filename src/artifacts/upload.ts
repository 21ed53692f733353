/**
 * `artifact.upload`: the request body streamed to R2, hashed on the way
 * through, never held whole in memory. A body with a declared length is one
 * streamed put; a chunked one (no Content-Length) goes up as an R2 multipart
 * upload, one part in memory at a time.
 */
import type { Db } from "../db/client";
import { mayHaveApplied } from "../db/executor";
import type { Config } from "../env";
import { toHex } from "../lib/crypto";
import { newId } from "../lib/ids";
import type { ArtifactUploadQuery } from "../protocol/host-api";
import type { ArtifactMetadata } from "../protocol/host-api-results";
import { artifactsStore, toArtifactMetadata, type ArtifactRow } from "../stores/artifacts";
import type { UploadGrant } from "../host-api/upload";
import { artifactExpiry, artifactR2Key, artifactTypeOf } from "./policy";
import { drainReader } from "../lib/drain";
import { BlobStoreUnavailable } from "./blob-fault";
import type { BoundedBucket } from "./bounded-bucket";
import { tapped, type BodyTap } from "./bounded-streams";

/** The body held fewer bytes than its Content-Length said, or a chunked body broke off. */
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

/** How much of a chunked body past its reservation is still read (and discarded) before the 413. */
const OVERSHOOT_DRAIN_BYTES = 1024 * 1024;

/** A chunked body grew past what its upload reserved; nothing was kept. */
export class UploadTooLargeError extends Error {
  override readonly name = "UploadTooLargeError";
}

/** R2 multipart parts: all but the last of one size, at least 5 MiB. */
const PART_BYTES = 5 * 1024 * 1024;

export async function storeUpload(
  deps: { db: Db; bucket: BoundedBucket; config: Config },
  grant: UploadGrant,
  query: ArtifactUploadQuery,
  body: ReadableStream<Uint8Array> | null,
  signal?: AbortSignal,
  /** Asked once the blob is stored, before it is recorded: whether the run is still active (§8: its token holds only then). */
  stillActive?: () => Promise<boolean>,
  /** More of the run's budget for a chunked body outgrowing `maxBytes`: what was granted (0: none), null once the run is over. */
  more?: MoreBudget,
): Promise<ArtifactMetadata> {
  const { length, maxBytes } = grant;
  const artifactId = newId("art");
  const r2Key = artifactR2Key(artifactId);
  const mimeType = query.mime_type ?? null;

  // SHA-256 fed chunk by chunk as the body passes; R2 pulls at its own pace, so backpressure reaches the client. The
  // run's deadline (`signal`) errors the body: R2's put fails and the request body is cancelled. R2 failing (or not
  // answering) leaves the rest of the body to be read and discarded before the error reaches here (bounded-streams.ts).
  const digest = new crypto.DigestStream("SHA-256");
  const hashWriter = digest.getWriter();
  let received = 0;
  // Whether the deadline had passed when the upload failed, read before the rest is drained: a deadline passing during
  // that drain (a courtesy to the client, which it cuts) leaves the answer the upload had earned (500, 413, 401).
  let lateWhenFailed: boolean | undefined;
  const noteFailure = () => void (lateWhenFailed ??= signal?.aborted === true);
  const hashing: BodyTap = {
    chunk(chunk) {
      received += chunk.length;
      return hashWriter.write(chunk);
    },
    end: () => hashWriter.close(),
    signal,
    draining: noteFailure,
  };
  // No body is an empty stream: one path for every length.
  const source = body ?? new ReadableStream<Uint8Array>({ start: (c) => c.close() });
  const options: R2PutOptions = { httpMetadata: mimeType ? { contentType: mimeType } : undefined };
  try {
    // R2 needs a known length (putStream fixes it, and fails if the body disagrees); bounded by R2's progress, not the sender's.
    if (length !== null) await deps.bucket.putStream(r2Key, source, length, options, hashing);
    else await putChunked(deps.bucket, r2Key, tapped(source, hashing), maxBytes, more, options, noteFailure);
  } catch (err) {
    const expected = length === null ? "a body without a length" : `${length} bytes`;
    if (lateWhenFailed ?? signal?.aborted) throw new UploadDeadlineError(`the run's deadline passed after ${received} bytes of ${expected}`, { cause: err });
    // R2 stopped taking the body (or failed it), not its sender: the host's fault (a retryable 500), not a truncated body.
    if (err instanceof BlobStoreUnavailable) throw err;
    if (length !== null && received < length) throw new TruncatedUploadError(`the body ended after ${received} of ${length} bytes`, { cause: err });
    throw err;
  }

  // Best effort, these deletes: what they leave is the orphan walk's (retention/orphans.ts), and the refusal stands.
  if (stillActive && !(await stillActive())) {
    await deps.bucket.delete(r2Key).catch(() => undefined);
    throw new RunEndedDuringUploadError("the run ended while its upload arrived; nothing was kept");
  }

  const now = Date.now();
  const row: ArtifactRow = {
    artifactId,
    artifactType: query.artifact_type ?? artifactTypeOf(mimeType),
    mimeType,
    name: query.name ?? null,
    sizeBytes: received,
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
    // Refused, no row will ever name this blob. Unanswered, the row may have been written: the blob stays with it.
    if (!mayHaveApplied(err)) await deps.bucket.delete(r2Key).catch(() => undefined);
    throw err;
  }
  return toArtifactMetadata(row);
}

export type MoreBudget = (wanted: number) => Promise<number | null>;

/**
 * A body of unknown length, up to `maxBytes` and what `more` adds to it as the body outgrows it (a part at a time):
 * one put when it fits in a part, else an R2 multipart upload whose parts are cut at exactly PART_BYTES as the body
 * arrives. Any failure aborts the multipart upload.
 */
async function putChunked(
  bucket: R2Bucket,
  key: string,
  body: ReadableStream<Uint8Array>,
  maxBytes: number,
  more: MoreBudget | undefined,
  options: R2PutOptions,
  /** Told as it fails, before the rest of the body is drained. */
  draining: () => void,
): Promise<void> {
  const reader = body.getReader();
  let part = new Uint8Array(Math.min(PART_BYTES, maxBytes));
  let filled = 0;
  let total = 0;
  let upload: R2MultipartUpload | null = null;
  const parts: R2UploadedPart[] = [];
  try {
    for (;;) {
      let chunk: ReadableStreamReadResult<Uint8Array>;
      try {
        chunk = await reader.read();
      } catch (err) {
        throw new TruncatedUploadError(`the body broke off after ${total} bytes`, { cause: err });
      }
      if (chunk.done) break;
      total += chunk.value.length;
      if (total > maxBytes && more) {
        const granted = await more(Math.max(PART_BYTES, total - maxBytes));
        if (granted === null) throw new RunEndedDuringUploadError("the run ended while its upload arrived; nothing was kept");
        maxBytes += granted;
      }
      if (total > maxBytes) throw new UploadTooLargeError(`the body outgrew the ${maxBytes} bytes this upload may take (ARTIFACT_UPLOAD_MAX_BYTES, or what is left of ARTIFACT_UPLOAD_RUN_MAX_BYTES)`);
      for (let offset = 0; offset < chunk.value.length; ) {
        // A part cut to a smaller budget, which has grown since: room for what the budget now allows, up to a part.
        if (filled === part.length) part = grown(part, Math.min(PART_BYTES, maxBytes - parts.length * PART_BYTES));
        const n = Math.min(part.length - filled, chunk.value.length - offset);
        part.set(chunk.value.subarray(offset, offset + n), filled);
        filled += n;
        offset += n;
        if (filled < PART_BYTES) continue;
        upload ??= await bucket.createMultipartUpload(key, options);
        parts.push(await upload.uploadPart(parts.length + 1, part));
        part = new Uint8Array(PART_BYTES);
        filled = 0;
      }
    }
    if (!upload) return void (await bucket.put(key, part.subarray(0, filled), options));
    if (filled > 0) parts.push(await upload.uploadPart(parts.length + 1, part.subarray(0, filled)));
    await upload.complete(parts);
  } catch (err) {
    await upload?.abort().catch(() => undefined);
    // The sender's failure (its body broke off, the run's deadline) has cut its body. Anything else is answered while
    // the client may still send: the rest is read and discarded first (bounded: lib/drain.ts), so it reads the answer,
    // not a reset. Past its reservation only a little more: a body that just outgrew it ends, one far larger is cut.
    if (err instanceof TruncatedUploadError) await reader.cancel(err).catch(() => undefined);
    else {
      draining();
      await drainReader(reader, err instanceof UploadTooLargeError ? OVERSHOOT_DRAIN_BYTES : undefined);
    }
    throw err;
  }
}

function grown(part: Uint8Array, size: number): Uint8Array<ArrayBuffer> {
  const bigger = new Uint8Array(size);
  bigger.set(part);
  return bigger;
}
