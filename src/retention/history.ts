import { and, gt, inArray, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { eventLog } from "../db/schema";
import { R2_DELETE_MAX_KEYS, type BatchLimits } from "./limits";
import { deleteOldTranscript } from "./transcript";

/**
 * EventLog rows created before `cutoff`, oldest first, and the platform raw
 * payloads (R2, `raw_ref`) only they name. Payloads go first, rows second: a
 * failure between the two leaves rows naming payloads already gone, which the
 * next sweep deletes again, never a payload no row names (it could never be
 * found again, and would be kept forever).
 */
export async function deleteOldEvents(db: Db, bucket: R2Bucket, cutoff: number, limits: BatchLimits) {
  let deleted = 0;
  for (let i = 0; i < limits.maxBatches; i++) {
    // sqlite-proxy hands raw rows back as arrays of column values.
    const next = await db.all<[number, string | null, number]>(
      sql`SELECT ${eventLog.seq}, ${eventLog.rawRef}, ${eventLog.createdAt} FROM ${eventLog} ORDER BY ${eventLog.seq} LIMIT ${limits.batchSize}`,
    );
    const firstRecent = next.findIndex((r) => Number(r[2]) >= cutoff);
    const batch = firstRecent < 0 ? next : next.slice(0, firstRecent);
    if (batch.length === 0) break;
    const lastSeq = batch[batch.length - 1][0];
    const named = [...new Set(batch.map((r) => r[1]).filter((r): r is string => typeof r === "string" && r.startsWith("raw/")))];
    if (named.length) {
      // One payload can hold several events (Telegram's new members): kept while a row past this batch names it.
      const still = new Set((await db.select({ ref: eventLog.rawRef }).from(eventLog).where(and(inArray(eventLog.rawRef, named), gt(eventLog.seq, lastSeq))).all()).map((r) => r.ref));
      const keys = named.filter((k) => !still.has(k));
      for (let j = 0; j < keys.length; j += R2_DELETE_MAX_KEYS) await bucket.delete(keys.slice(j, j + R2_DELETE_MAX_KEYS));
    }
    // Every row up to lastSeq is in the batch: EventLog rows are deleted in seq order, none exempt.
    await db.run(sql`DELETE FROM ${eventLog} WHERE ${eventLog.seq} <= ${lastSeq}`);
    deleted += batch.length;
    if (batch.length < limits.batchSize) break;
  }
  return deleted;
}

export async function deleteOldHistory(db: Db, bucket: R2Bucket, cutoff: number, limits: BatchLimits) {
  return {
    eventLog: await deleteOldEvents(db, bucket, cutoff, limits),
    transcript: await deleteOldTranscript(db, bucket, cutoff, limits),
  };
}
