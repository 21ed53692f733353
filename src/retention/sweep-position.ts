import { BlobStoreUnavailable } from "../artifacts/blob-fault";

/**
 * Where a sweep that walks more than one invocation can take keeps its place: a small JSON object in the bucket,
 * under `host/` (outside every swept prefix). A place stored unreadable counts as the start: it costs one walk from the
 * beginning, nothing else. One R2 does not give (it refused, or did not answer) throws, and the caller says what then:
 * the walks of runs never handed over and of the transcript start over (they need only the database), the orphan walk
 * fails as its listing would, and the message-ref backfill waits for R2 (walking again would write over its `done`).
 */
export async function readSweepPosition<T>(bucket: R2Bucket, key: string, parse: (stored: Record<string, unknown>) => T | null): Promise<T | null> {
  const stored = await bucket.get(key);
  if (!stored) return null;
  try {
    const value: unknown = await stored.json();
    return value && typeof value === "object" ? parse(value as Record<string, unknown>) : null;
  } catch (err) {
    // R2 failing to send its body, or not sending it in time, is R2 not giving the place, as a get that fails is.
    if (err instanceof BlobStoreUnavailable) throw err;
    return null;
  }
}

/** `position` null: the walk reached the end, and the next one starts over. */
export async function writeSweepPosition(bucket: R2Bucket, key: string, position: object | null): Promise<void> {
  await bucket.put(key, JSON.stringify(position ?? {}), { httpMetadata: { contentType: "application/json" } });
}
