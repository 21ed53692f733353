import { and, inArray, lt, notInArray } from "drizzle-orm";
import { batchAll, type Db } from "../db/client";
import { run, runEvent } from "../db/schema";
import { NOT_STARTED } from "../stores/runs";
import type { BatchLimits } from "./limits";

/**
 * Ended runs created before `cutoff`, each with its ledger, oldest first,
 * `batchSize` runs per round trip. A queued or running run stays whatever
 * its age: its Durable Object still owns it and will write its end.
 */
export async function deleteOldRuns(db: Db, cutoff: number, limits: BatchLimits): Promise<number> {
  let deleted = 0;
  for (let i = 0; i < limits.maxBatches; i++) {
    // Walks the (created_at, run_id) index from the oldest; both deletes below see the same runs (one transaction).
    const oldest = db
      .select({ runId: run.runId })
      .from(run)
      .where(and(lt(run.createdAt, cutoff), notInArray(run.status, [...NOT_STARTED, "running"])))
      .orderBy(run.createdAt, run.runId)
      .limit(limits.batchSize);
    const [, gone] = (await batchAll(db, [
      db.delete(runEvent).where(inArray(runEvent.runId, oldest)),
      db.delete(run).where(inArray(run.runId, oldest)).returning({ runId: run.runId }),
    ])) as [unknown, { runId: string }[]];
    deleted += gone.length;
    if (gone.length < limits.batchSize) break;
  }
  return deleted;
}
