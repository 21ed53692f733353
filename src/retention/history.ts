import { inArray, sql, type SQL } from "drizzle-orm";
import type { Db } from "../db/client";
import { eventLog, transcript } from "../db/schema";
import { R2_DELETE_MAX_KEYS, type BatchLimits } from "./limits";

// `rowid` is SQLite's row order (insertion order) of the transcript table, which has a text primary key.
const transcriptRowid = sql.raw(`"transcript"."rowid"`);

/**
 * Deletes rows created before `cutoff`, oldest first, `batchSize` per
 * statement. Rows are appended in time order, so the old ones are those
 * before the first row at or after the cutoff, found by a scan in key order
 * that stops there: no index on created_at is needed and nothing newer is
 * ever read. `keep` exempts rows that must stay.
 */
async function deleteOldest(
  db: Db,
  table: typeof eventLog | typeof transcript,
  order: SQL,
  cutoff: number,
  limits: BatchLimits,
  opts: { keep?: SQL; returning?: SQL; onDeleted?: (values: unknown[]) => Promise<void> } = {},
) {
  const firstRecent = sql`COALESCE((SELECT ${order} FROM ${table} WHERE ${table.createdAt} >= ${cutoff} ORDER BY ${order} LIMIT 1), 9223372036854775807)`;
  let deleted = 0;
  for (let i = 0; i < limits.maxBatches; i++) {
    // sqlite-proxy hands raw rows back as arrays of column values.
    const rows = await db.all<unknown[]>(sql`
      DELETE FROM ${table}
      WHERE ${order} IN (SELECT ${order} FROM ${table} WHERE ${order} < ${firstRecent} AND NOT (${opts.keep ?? sql`0`}) ORDER BY ${order} LIMIT ${limits.batchSize})
      RETURNING ${opts.returning ?? sql`1`}`);
    await opts.onDeleted?.(rows.map((r) => r[0]));
    deleted += rows.length;
    if (rows.length < limits.batchSize) break;
  }
  return deleted;
}

/** A platform's raw payload (R2, `raw_ref`) goes with the last EventLog row that names it. */
async function deleteRawPayloads(db: Db, bucket: R2Bucket, refs: unknown[]) {
  const named = [...new Set(refs.filter((r): r is string => typeof r === "string" && r.startsWith("raw/")))];
  if (!named.length) return;
  // One payload can hold several events (Telegram's new members): keep it while any of them remains.
  const stillNamed = new Set((await db.select({ ref: eventLog.rawRef }).from(eventLog).where(inArray(eventLog.rawRef, named)).all()).map((r) => r.ref));
  const keys = named.filter((k) => !stillNamed.has(k));
  for (let i = 0; i < keys.length; i += R2_DELETE_MAX_KEYS) await bucket.delete(keys.slice(i, i + R2_DELETE_MAX_KEYS));
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
    eventLog: await deleteOldest(db, eventLog, sql`${eventLog.seq}`, cutoff, limits, {
      returning: sql`${eventLog.rawRef}`,
      onDeleted: (refs) => deleteRawPayloads(db, bucket, refs),
    }),
    transcript: await deleteOldest(db, transcript, transcriptRowid, cutoff, limits, { keep: newestOfItsConversation }),
  };
}
