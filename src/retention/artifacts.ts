import type { Db } from "../db/client";
import { artifactsStore } from "../stores/artifacts";
import type { BatchLimits } from "./limits";

/**
 * Expired artifacts: blobs first, then rows. A failure between the two leaves
 * rows whose blobs are gone; the next run deletes them again (R2 deletes are
 * idempotent), so nothing is ever left unreferenced in R2.
 */
export async function deleteExpiredArtifacts(db: Db, bucket: R2Bucket, now: number, limits: BatchLimits): Promise<number> {
  const store = artifactsStore(db);
  let deleted = 0;
  for (let i = 0; i < limits.maxBatches; i++) {
    const expired = await store.expired(now, limits.batchSize);
    if (expired.length === 0) break;
    await bucket.delete(expired.map((a) => a.r2Key));
    await store.deleteStatement(expired.map((a) => a.artifactId));
    deleted += expired.length;
    if (expired.length < limits.batchSize) break;
  }
  return deleted;
}
