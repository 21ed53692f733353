import { and, gt, inArray, sql, type SQL } from "drizzle-orm";
import type { Db } from "../db/client";
import { eventLog, transcript } from "../db/schema";
import { R2_DELETE_MAX_KEYS, type BatchLimits } from "./limits";

// `rowid` is SQLite's row order (insertion order) of the transcript table, which has a text primary key.
const transcriptRowid = sql.raw(`"transcript"."rowid"`);

// Rows are appended in time order, so the old ones are those before the first row at or after the cutoff. That row
// is looked for only among the rows a statement would delete (key order, from where the last stopped): no index on
// created_at is needed, and a statement reads about its batch, however large the backlog of old rows before it.

/**
 * Deletes transcript rows created before `cutoff`, oldest first, `batchSize` per statement; `keep` exempts rows
 * that must stay. Each statement starts where the previous one stopped: the kept rows before that point were
 * just checked, and rescanning them per statement would cost (kept rows × statements).
 */
async function deleteOldTranscript(db: Db, cutoff: number, limits: BatchLimits, keep: SQL) {
  let deleted = 0;
  let after = 0;
  for (let i = 0; i < limits.maxBatches; i++) {
    // The next batch of rows not kept, then those of them before the first recent row (kept or not) up to its last.
    // sqlite-proxy hands raw rows back as arrays of column values.
    const rows = await db.all<[number]>(sql`
      DELETE FROM ${transcript}
      WHERE ${transcriptRowid} IN (
        WITH candidate(id) AS (SELECT ${transcriptRowid} FROM ${transcript} WHERE ${transcriptRowid} > ${after} AND NOT (${keep}) ORDER BY ${transcriptRowid} LIMIT ${limits.batchSize})
        SELECT id FROM candidate WHERE id < COALESCE((SELECT ${transcriptRowid} FROM ${transcript} WHERE ${transcriptRowid} > ${after} AND ${transcriptRowid} <= (SELECT MAX(id) FROM candidate) AND ${transcript.createdAt} >= ${cutoff} ORDER BY ${transcriptRowid} LIMIT 1), 9223372036854775807))
      RETURNING ${transcriptRowid}`);
    deleted += rows.length;
    if (rows.length < limits.batchSize) break;
    after = Math.max(...rows.map((r) => Number(r[0])));
  }
  return deleted;
}

/**
 * EventLog rows created before `cutoff`, oldest first, and the platform raw
 * payloads (R2, `raw_ref`) only they name. Payloads go first, rows second: a
 * failure between the two leaves rows naming payloads already gone, which the
 * next sweep deletes again, never a payload no row names (it could never be
 * found again, and would be kept forever).
 */
async function deleteOldEvents(db: Db, bucket: R2Bucket, cutoff: number, limits: BatchLimits) {
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

/**
 * A conversation's transcript seq is MAX(seq) + 1 (stores/transcript.ts), so
 * deleting its newest item would restart the numbering and make old cursors
 * (a runner's compaction checkpoint, say) point at new items. The newest item
 * of each conversation is therefore kept until a newer one exists.
 */
const newestOfItsConversation = sql`${transcript.seq} = (SELECT MAX(newer.seq) FROM ${transcript} AS newer WHERE newer.conversation_key = ${transcript.conversationKey})`;

export async function deleteOldHistory(db: Db, bucket: R2Bucket, cutoff: number, limits: BatchLimits) {
  return {
    eventLog: await deleteOldEvents(db, bucket, cutoff, limits),
    transcript: await deleteOldTranscript(db, cutoff, limits, newestOfItsConversation),
  };
}
