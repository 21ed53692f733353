import { and, eq, inArray, sql, type Placeholder, type SQL } from "drizzle-orm";
import type { Db } from "../db/client";
import { compiled, param } from "../db/compiled";
import { eventLog, run } from "../db/schema";

/**
 * Whether the message of this event (its EventLog row) was recalled: marked by the recall's batch (event-revision.ts).
 * Only a chat message's row (named by its platform id) bears the host's mark; an API event's metadata is its caller's.
 */
const marked = sql`${eventLog.messageRef} IS NOT NULL AND json_type(${eventLog.metadataJson}, '$.recalled') IS NOT NULL`;
export const recalled = (eventId: Placeholder | string): SQL => sql`EXISTS (SELECT 1 FROM ${eventLog} WHERE ${eventLog.eventId} = ${eventId} AND ${marked})`;

/** Its negation, for a run's start (runs.ts markRunning): a null id is no message, never recalled. */
export const notRecalled = (eventId: Placeholder): SQL => sql`NOT ${recalled(eventId)}`;

const recalledRun = compiled((db) =>
  db
    .select({ status: run.status, startedAt: run.startedAt })
    .from(run)
    .where(and(eq(run.runId, param("runId")), recalled(param("messageEventId"))))
    .limit(1),
);

/**
 * The run as it stands when the message it answers was recalled (none when it was not), read in its start's batch:
 * a recall written in libSQL whose work in the conversation's object was never done (its call failed, or the instance
 * doing it died) is done by that start instead (claim.ts).
 */
export const recalledRunStatement = (db: Db, runId: string, messageEventId: string | null) => recalledRun(db, { runId, messageEventId });

/** Which of these events' messages were recalled (their ids), read in a batch with the writes it decides (steering-pull.ts). */
export const recalledAmong = (db: Db, eventIds: string[]) => db.select({ eventId: eventLog.eventId }).from(eventLog).where(and(inArray(eventLog.eventId, eventIds), marked));
