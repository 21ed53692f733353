import { sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { eventLog, transcript } from "../db/schema";
import type { BatchLimits } from "./limits";

/**
 * Deletes rows created before `cutoff`, oldest first. Each statement looks
 * only at the first `batchSize` rows in insertion order (the primary key for
 * event_log, the rowid for transcript), so it costs the same however large
 * the table is and needs no index on created_at; rows are appended in time
 * order, so those are the oldest.
 */
async function deleteOldest(db: Db, table: typeof eventLog | typeof transcript, order: ReturnType<typeof sql>, cutoff: number, limits: BatchLimits) {
  let deleted = 0;
  for (let i = 0; i < limits.maxBatches; i++) {
    const rows = await db.all<{ n: number }>(sql`
      DELETE FROM ${table}
      WHERE ${order} IN (SELECT ${order} FROM ${table} ORDER BY ${order} LIMIT ${limits.batchSize})
        AND ${table.createdAt} < ${cutoff}
      RETURNING 1 AS n`);
    deleted += rows.length;
    if (rows.length < limits.batchSize) break;
  }
  return deleted;
}

export async function deleteOldHistory(db: Db, cutoff: number, limits: BatchLimits) {
  return {
    eventLog: await deleteOldest(db, eventLog, sql`${eventLog.seq}`, cutoff, limits),
    transcript: await deleteOldest(db, transcript, sql`rowid`, cutoff, limits),
  };
}
