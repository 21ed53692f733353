import { and, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { eventLog } from "../db/schema";
import { headOf } from "../lib/text";
import { toEventRecord, type EventRow } from "./event-log";
import { newerEdit, revisedMessageRow, type TranscriptRevision } from "./transcript-revision";

/** As long as ingress makes an event's input_summary (ingress/accept.ts). */
const SUMMARY_MAX = 200;

/**
 * A recall or an edit marked on its message's EventLog row, for what runners read of it (`event.get`, `event.page`:
 * runnerEventRecord): `metadata.recalled {event_id, recalled_at}`, or `metadata.edited {event_id, version, edited_at,
 * input_summary}` (the newest words' head). Only the mark is written: the row keeps the message as received, for
 * operators. The same rules as its transcript item's (transcript-revision.ts): an older edit arriving late, an edit
 * of a recalled message, or a revision sent again changes nothing. Answers the row it marked (none when it changed nothing).
 */
export function eventRevisionStatement(db: Db, r: TranscriptRevision, at: string) {
  const m = eventLog.metadataJson;
  const unrecalled = sql`json_type(${m}, '$.recalled') IS NULL`;
  if (!r.edit) {
    const recalled = JSON.stringify({ event_id: r.eventId, recalled_at: at });
    return db
      .update(eventLog)
      .set({ metadataJson: sql`json_set(${m}, '$.recalled', json(${recalled}))` })
      .where(and(revisedMessageRow(r), unrecalled))
      .returning({ eventId: eventLog.eventId });
  }
  const edited = JSON.stringify({ event_id: r.eventId, version: r.edit.version, edited_at: at, input_summary: headOf(r.edit.text ?? "", SUMMARY_MAX) || null });
  return db
    .update(eventLog)
    .set({ metadataJson: sql`json_set(${m}, '$.edited', json(${edited}))` })
    .where(and(revisedMessageRow(r), unrecalled, newerEdit(m, r.edit)))
    .returning({ eventId: eventLog.eventId });
}

/**
 * The §8 record a runner reads: a chat message as its user left it, as history shows it. Recalled, nothing of it
 * (no input_summary; metadata only `recalled`, not even the names of files it brought); edited, the newest words'
 * summary and `metadata.edited {event_id, version, edited_at}`. Only a chat message's row (named by its platform id,
 * `message_ref`) is read for the mark: an API event's metadata is its caller's, and says nothing of the kind.
 */
export function runnerEventRecord(row: EventRow) {
  const record = toEventRecord(row);
  if (row.messageRef === null || row.eventType !== "message.received") return record;
  const { recalled, edited } = record.metadata;
  if (recalled) return { ...record, input_summary: null, metadata: { recalled } };
  if (!edited || typeof edited !== "object") return record;
  const { input_summary: summary, ...mark } = edited as Record<string, unknown>;
  return { ...record, input_summary: typeof summary === "string" ? summary : null, metadata: { ...record.metadata, edited: mark } };
}
