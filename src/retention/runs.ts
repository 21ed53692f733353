import { and, inArray, lt, notInArray, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { run, runEvent } from "../db/schema";
import { NOT_STARTED } from "../stores/runs";
import type { BatchLimits } from "./limits";

// `rowid` is SQLite's row order of the ledger table, whose primary key is (run_id, seq).
const ledgerRowid = sql.raw(`"run_event"."rowid"`);

/**
 * Ended runs created before `cutoff`, each with its ledger, oldest first. A
 * ledger has a row per result (every delta of a streamed reply), so ledgers
 * go first, at most `batchSize` rows per statement, and a run goes in the
 * statement right after the one that deleted the last of its ledger: no
 * statement deletes more than `batchSize` rows or holds the write lock for
 * long, and a run is left without its ledger only between two statements. A queued or running run stays whatever its
 * age: its Durable Object still owns it and will write its end.
 */
export async function deleteOldRuns(db: Db, cutoff: number, limits: BatchLimits): Promise<number> {
  // Walks the (created_at, run_id) index from the oldest.
  const oldest = () =>
    db
      .select({ runId: run.runId })
      .from(run)
      .where(and(lt(run.createdAt, cutoff), notInArray(run.status, [...NOT_STARTED, "running"])))
      .orderBy(run.createdAt, run.runId)
      .limit(limits.batchSize);
  let deleted = 0;
  for (let i = 0; i < limits.maxBatches; i++) {
    const rows = await db.all(sql`
      DELETE FROM ${runEvent} WHERE ${ledgerRowid} IN (SELECT ${ledgerRowid} FROM ${runEvent} WHERE ${inArray(runEvent.runId, oldest())} LIMIT ${limits.batchSize})
      RETURNING 1`);
    // The runs whose ledgers are gone now (a statement may finish one run's ledger and start the next one's).
    const gone = await db.all(sql`
      DELETE FROM ${run} WHERE ${inArray(run.runId, oldest())}
        AND NOT EXISTS (SELECT 1 FROM ${runEvent} WHERE ${runEvent.runId} = ${run.runId})
      RETURNING 1`);
    deleted += gone.length;
    if (rows.length < limits.batchSize && gone.length < limits.batchSize) break;
  }
  return deleted;
}
