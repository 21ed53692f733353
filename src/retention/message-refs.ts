import { and, eq, gte, inArray, isNotNull, isNull, lt, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { eventLog } from "../db/schema";
import { PLATFORMS_WITH_MESSAGE_REF, recordedMessageRef } from "../platforms/message-ref";
import type { BatchLimits } from "./limits";
import { readSweepPosition, writeSweepPosition } from "./sweep-position";

/** Where the walk keeps its place between invocations: `{before}` (a seq), or `{done: true}` once it has passed the oldest row. */
export const MESSAGE_REF_SWEEP_KEY = "host/message-ref-sweep.json";

type Place = { done: true } | { before: number } | null;

const placeOf = (p: Record<string, unknown>): Place => (p.done === true ? { done: true } : typeof p.before === "number" ? { before: p.before } : null);

/**
 * Gives the chat messages recorded before migration 0021 their `message_ref` (recorded since, they have it from
 * ingress), so a recall or edit of one finds it. EventLog is walked newest first, from the row that was newest when the
 * walk began (a message recalled or edited is most often a recent one, and so are those the previous Worker recorded
 * between the migration and the deploy), `batchSize` rows per statement and at most `maxBatches` statements per
 * invocation, each holding the write lock briefly however large EventLog is. Once past the oldest row it is done for
 * good (on a fresh database, at the first invocation); a place that cannot be read starts it again, which writes
 * nothing twice. Answers how many rows it gave a ref.
 */
export async function backfillMessageRefs(db: Db, bucket: R2Bucket, limits: BatchLimits): Promise<number> {
  const place = await readSweepPosition(bucket, MESSAGE_REF_SWEEP_KEY, placeOf);
  if (place && "done" in place) return 0;
  let before = place?.before;
  let filled = 0;
  for (let i = 0; i < limits.maxBatches; i++) {
    // The batch's lowest seq, read from the table's own b-tree (the seqs only, no row's data): none when fewer are left.
    const [low] = await db.all<[number]>(
      sql`SELECT ${eventLog.seq} FROM ${eventLog} ${before === undefined ? sql`` : sql`WHERE ${eventLog.seq} < ${before}`} ORDER BY ${eventLog.seq} DESC LIMIT 1 OFFSET ${limits.batchSize - 1}`,
    );
    const from = low ? Number(low[0]) : 0;
    // Only rows given a ref are written: a message whose data names no id (ingress found none either) stays as it is.
    const lacking = and(eq(eventLog.eventType, "message.received"), inArray(eventLog.source, PLATFORMS_WITH_MESSAGE_REF), isNull(eventLog.messageRef), isNotNull(recordedMessageRef()));
    const inBatch = and(gte(eventLog.seq, from), before === undefined ? undefined : lt(eventLog.seq, before));
    filled += (await db.update(eventLog).set({ messageRef: recordedMessageRef() }).where(and(inBatch, lacking)).returning({ seq: eventLog.seq }).all()).length;
    if (!low) {
      await writeSweepPosition(bucket, MESSAGE_REF_SWEEP_KEY, { done: true });
      return filled;
    }
    before = from;
  }
  await writeSweepPosition(bucket, MESSAGE_REF_SWEEP_KEY, { before });
  return filled;
}
