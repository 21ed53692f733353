import { eq } from "drizzle-orm";
import type { Db } from "../db/client";
import { artifact } from "../db/schema";
import { loggedError } from "../lib/describe-error";

/**
 * The blobs a run's write that may not have been applied stored (`keys`: it got no answer), once the run's end is
 * recorded: that write's rows are written only while the run is running (whileRunning), so it can no longer land, and
 * a blob no artifact row of the run names now never will be named. Removed at once, not left a week for the orphan
 * walk; best effort (the database or R2 failing, or R2 not answering within BLOB_OP_TIMEOUT_MS: the run's end, and the
 * conversation's next run, wait no longer), the walk still takes them.
 */
export async function removeUnnamedBlobs(db: Db, bucket: R2Bucket, runId: string, keys: string[]): Promise<void> {
  if (!keys.length) return;
  try {
    const rows = await db.select({ key: artifact.r2Key }).from(artifact).where(eq(artifact.runId, runId)).all();
    const named = new Set(rows.map((r) => r.key));
    const unnamed = keys.filter((k) => !named.has(k));
    if (unnamed.length) await bucket.delete(unnamed);
  } catch (err) {
    console.warn(`run ${runId}: blobs of a write that got no answer left to the orphan walk (${loggedError(err)})`);
  }
}
