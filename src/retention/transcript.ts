import { sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { transcript } from "../db/schema";
import type { BatchLimits } from "./limits";
import { readSweepPosition, writeSweepPosition } from "./sweep-position";

/** Where the transcript walks keep their places between invocations (see sweep-position.ts). */
export const TRANSCRIPT_SWEEP_POSITION_KEY = "host/transcript-sweep.json";

// `rowid` is SQLite's row order (insertion order) of the transcript table, which has a text primary key.
const rowid = sql.raw(`"transcript"."rowid"`);

/**
 * A conversation's transcript seq is MAX(seq) + 1 (stores/transcript.ts), so deleting its newest item would restart
 * the numbering and make old cursors (a runner's compaction checkpoint, say) point at new items. The newest item of
 * each conversation is therefore kept until a newer one exists.
 */
const newestOfItsConversation = sql`${transcript.seq} = (SELECT MAX(newer.seq) FROM ${transcript} AS newer WHERE newer.conversation_key = ${transcript.conversationKey})`;

/**
 * `after`: every row up to it is old and was deleted, or kept as its conversation's newest, when the walk passed it.
 * `checked`: every row up to it has had its conversation's previous item looked at (see deleteWoken).
 * `cutoff`: the cutoff both walks last ran with.
 */
type Position = { after: number; checked: number; cutoff: number };
const positionOf = (p: Record<string, unknown>): Position | null =>
  typeof p.after === "number" && typeof p.checked === "number" && typeof p.cutoff === "number" ? { after: p.after, checked: p.checked, cutoff: p.cutoff } : null;

/**
 * Transcript rows created before `cutoff`, but each conversation's newest, oldest first, `batchSize` per statement.
 *
 * Rows are appended in time order, so the old ones are those before the first row at or after the cutoff; no index on
 * created_at is needed. The walk keeps its place between invocations: the items dormant conversations keep pile up at
 * the front of the table, and walking them again on every invocation would cost (quiet conversations) each time, not
 * (batch). An item passed as its conversation's newest becomes deletable when the conversation gets a new one: a
 * second walk, over the rows appended since it last ran, deletes the old item before each (deleteWoken).
 */
export async function deleteOldTranscript(db: Db, bucket: R2Bucket, cutoff: number, limits: BatchLimits): Promise<number> {
  const last = await lastRowid(db);
  // A place that cannot be read costs one walk from the start. One past the table's end (a VACUUM renumbered the
  // rows, the database was restored) is not trusted either, nor one of an earlier cutoff (RETENTION_DAYS raised: an
  // item passed as old may be recent now, and a newer item of its conversation may be checked before it is old again).
  // Starting over, no row up to `last` was passed as kept.
  const stored = await readSweepPosition(bucket, TRANSCRIPT_SWEEP_POSITION_KEY, positionOf).catch(() => null);
  const start = stored && stored.after <= last && stored.checked <= last && stored.cutoff <= cutoff ? stored : { after: 0, checked: last };
  const old = await deleteOld(db, cutoff, limits, start.after);
  // The walk over old rows first; the other gets the statements it did not fill (all of them once it has caught up).
  const woken = await deleteWoken(db, cutoff, { ...limits, maxBatches: limits.maxBatches - old.full }, start.checked);
  await writeSweepPosition(bucket, TRANSCRIPT_SWEEP_POSITION_KEY, { after: old.after, checked: woken.checked, cutoff });
  return old.deleted + woken.deleted;
}

async function lastRowid(db: Db): Promise<number> {
  // sqlite-proxy hands raw rows back as arrays of column values.
  const rows = await db.all<[number | null]>(sql`SELECT MAX(${rowid}) FROM ${transcript}`);
  return Number(rows[0]?.[0] ?? 0);
}

/** The walk over old rows, from `after`: each statement starts where the previous one stopped. */
async function deleteOld(db: Db, cutoff: number, limits: BatchLimits, after: number) {
  let deleted = 0;
  let full = 0;
  for (let i = 0; i < limits.maxBatches; i++) {
    // The next batch of rows not kept, then those of them before the first recent row (kept or not) up to its last.
    const rows = await db.all<[number]>(sql`
      DELETE FROM ${transcript}
      WHERE ${rowid} IN (
        WITH candidate(id) AS (SELECT ${rowid} FROM ${transcript} WHERE ${rowid} > ${after} AND NOT (${newestOfItsConversation}) ORDER BY ${rowid} LIMIT ${limits.batchSize})
        SELECT id FROM candidate WHERE id < COALESCE((SELECT ${rowid} FROM ${transcript} WHERE ${rowid} > ${after} AND ${rowid} <= (SELECT MAX(id) FROM candidate) AND ${transcript.createdAt} >= ${cutoff} ORDER BY ${rowid} LIMIT 1), 9223372036854775807))
      RETURNING ${rowid}`);
    deleted += rows.length;
    if (rows.length === limits.batchSize) {
      after = Math.max(...rows.map((r) => Number(r[0])));
      full++;
      continue;
    }
    // Fewer than a batch: every row before the first recent one (or the table's end) was deleted or kept, and the
    // next invocation starts there rather than walking the kept ones again.
    const [[passed]] = await db.all<[number | null]>(sql`
      SELECT COALESCE((SELECT ${rowid} FROM ${transcript} WHERE ${rowid} > ${after} AND ${transcript.createdAt} >= ${cutoff} ORDER BY ${rowid} LIMIT 1) - 1, (SELECT MAX(${rowid}) FROM ${transcript}))`);
    after = Math.max(after, Number(passed ?? 0));
    break;
  }
  return { deleted, after, full };
}

/**
 * The walk over rows appended since it last ran, from `checked`, `batchSize` rows per statement: for each, its
 * conversation's previous item, if old, is deleted. That item was its conversation's newest until the row came, and
 * may have been passed and kept by the walk over old rows; one not passed yet is that walk's to delete.
 */
async function deleteWoken(db: Db, cutoff: number, limits: BatchLimits, checked: number) {
  let deleted = 0;
  for (let i = 0; i < limits.maxBatches; i++) {
    const [[upTo, count]] = await db.all<[number | null, number]>(
      sql`SELECT MAX(id), COUNT(*) FROM (SELECT ${rowid} AS id FROM ${transcript} WHERE ${rowid} > ${checked} ORDER BY ${rowid} LIMIT ${limits.batchSize})`,
    );
    if (!Number(count) || upTo === null) break;
    const rows = await db.all<[number]>(sql`
      DELETE FROM ${transcript}
      WHERE ${rowid} IN (
        SELECT (SELECT prev.rowid FROM ${transcript} AS prev WHERE prev.conversation_key = later.conversation_key AND prev.seq < later.seq ORDER BY prev.seq DESC LIMIT 1)
        FROM ${transcript} AS later WHERE later.rowid > ${checked} AND later.rowid <= ${upTo})
      AND ${transcript.createdAt} < ${cutoff}
      RETURNING 1`);
    deleted += rows.length;
    checked = Number(upTo);
    if (Number(count) < limits.batchSize) break;
  }
  return { deleted, checked };
}
