import { and, eq, sql, type SQL } from "drizzle-orm";
import { batchAll, type Db } from "../db/client";
import { eventLog, transcript } from "../db/schema";
import { headOf } from "../lib/text";
import { searchTextOf } from "./fts-query";
import { editedParts } from "./transcript-revision";

/** As long as ingress makes an event's input_summary (ingress/accept.ts). */
const SUMMARY_MAX = 200;
/** A `data` key written in place: a JSON path names it as it is. */
const PLAIN_KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;

export interface ContentRead {
  /** The message's EventLog row. */
  eventId: string;
  /** Its text as recorded unread: written over only while it still says that. */
  was: string;
  text: string;
  /** The keys of its `data` the read set, with their values. */
  data: Record<string, unknown>;
}

/**
 * What a message recorded unread said once read later (a Lark forward left unread, read for a reply to it:
 * platforms/unaddressed-read.ts), written as ingress would have recorded it: its EventLog row's `input.text`,
 * input_summary and the `data` the read set, and its transcript item's words (an edit's way, transcript-revision.ts),
 * so later replies, history and search take it as stored. Only while the row still says `was`, and neither it nor its
 * item was recalled: a read written already (another reply's, at the same time), or a recall, stands. One batch.
 */
export async function recordContentRead(db: Db, r: ContentRead): Promise<void> {
  const t = transcript;
  const unrecalled = (metadata: typeof t.metadataJson | typeof eventLog.metadataJson) => sql`json_type(${metadata}, '$.recalled') IS NULL`;
  const pairs = Object.entries(r.data).flatMap(([key, value]): SQL[] => (PLAIN_KEY.test(key) ? [sql`${`$.${key}`}, json(${JSON.stringify(value ?? null)})`] : []));
  const item = db
    .update(t)
    .set({ content: r.text, searchText: searchTextOf(r.text), contentJson: editedParts(t.contentJson, r.text) })
    .where(and(eq(t.eventId, r.eventId), eq(t.role, "user"), eq(t.content, r.was), unrecalled(t.metadataJson)));
  const row = db
    .update(eventLog)
    .set({
      inputJson: sql`json_set(${eventLog.inputJson}, '$.text', ${r.text})`,
      inputSummary: headOf(r.text, SUMMARY_MAX) || null,
      ...(pairs.length ? { dataJson: sql`json_set(${eventLog.dataJson}, ${sql.join(pairs, sql`, `)})` } : {}),
    })
    .where(and(eq(eventLog.eventId, r.eventId), sql`json_extract(${eventLog.inputJson}, '$.text') = ${r.was}`, unrecalled(eventLog.metadataJson)));
  await batchAll(db, [item, row]);
}
