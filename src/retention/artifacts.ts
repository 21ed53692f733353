import type { Db } from "../db/client";
import { artifactsStore } from "../stores/artifacts";
import type { BatchLimits } from "./limits";

/**
 * Expired artifacts: rows first, each only if still expired when deleted (a reply may have extended it since it was
 * read), then the blobs of the rows deleted. A failure between the two (R2 away, the delete's answer lost) leaves
 * blobs no row names, which the orphan sweep (orphans.ts) removes; never a row whose blob is gone.
 */
export async function deleteExpiredArtifacts(db: Db, bucket: R2Bucket, now: number, limits: BatchLimits): Promise<number> {
  const store = artifactsStore(db);
  let deleted = 0;
  for (let i = 0; i < limits.maxBatches; i++) {
    const expired = await store.expired(now, limits.batchSize);
    if (expired.length === 0) break;
    const gone = await store.deleteExpired(expired.map((a) => a.artifactId), now);
    if (gone.length) await bucket.delete(gone.map((a) => a.r2Key));
    deleted += gone.length;
    if (expired.length < limits.batchSize) break;
  }
  return deleted;
}
