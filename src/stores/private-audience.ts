import { and, eq, exists, not, or, sql, type SQL } from "drizzle-orm";
import { alias, type SQLiteColumn } from "drizzle-orm/sqlite-core";
import type { Db } from "../db/client";
import { artifact, eventLog, run } from "../db/schema";
import { PRIVATE_AUDIENCE_KEY } from "../platforms/audience";

/**
 * What of a conversation's history a run may read (README "Who sees what in a group chat"): everything but what is
 * private to another audience than its own (platforms/audience.ts). `audience` is the run's: null when its answer is
 * the whole chat's, which then reads nothing private at all. An event's audience is marked on its EventLog row; its
 * transcript items (the user's words, and the answer of the run it started), the host's records of that run, and the
 * files of both (its input's, those its run made) follow it.
 */
const PATH = `$.${PRIVATE_AUDIENCE_KEY}`;

/** True when `metadataJson` (an EventLog row's) marks its event private to an audience other than `audience`. */
const privateToOther = (metadataJson: SQLiteColumn, audience: string | null): SQL =>
  sql`(json_extract(${metadataJson}, ${PATH}) IS NOT NULL AND json_extract(${metadataJson}, ${PATH}) IS NOT ${audience})`;

/** A transcript item of the event `eventId` (the user's own item, or the answer of its run) is readable: its event is not another audience's. */
export function readableItem(db: Db, eventId: SQLiteColumn, audience: string | null): SQL {
  const owner = alias(eventLog, "audience_event");
  return not(sql`EXISTS ${db.select({ one: sql`1` }).from(owner).where(and(eq(owner.eventId, eventId), privateToOther(owner.metadataJson, audience)))}`);
}

/**
 * An EventLog row is readable: neither it (an event private to another audience) nor the run it names (whose event
 * is: the host's records of that run, its steering, its delivery, its denials) is another audience's.
 */
export function readableEventRow(db: Db, log: typeof eventLog, audience: string | null): SQL {
  const [ofRun, runEvent] = [alias(run, "audience_run"), alias(eventLog, "audience_run_event")];
  const runPrivate = db
    .select({ one: sql`1` })
    .from(ofRun)
    .innerJoin(runEvent, eq(runEvent.eventId, ofRun.eventId))
    .where(and(eq(ofRun.runId, log.runId), privateToOther(runEvent.metadataJson, audience)));
  return and(not(privateToOther(log.metadataJson, audience)), not(sql`EXISTS ${runPrivate}`))!;
}

/** Whether the EventLog row `eventId` is readable by a run answering `audience` (false also when there is none). */
export async function eventReadable(db: Db, eventId: string, audience: string | null): Promise<boolean> {
  const found = await db
    .select({ one: sql<number>`1` })
    .from(eventLog)
    .where(and(eq(eventLog.eventId, eventId), readableEventRow(db, eventLog, audience)))
    .get();
  return found !== undefined;
}

/**
 * An artifact row is private to another audience than `audience`: the event it is an input of (its metadata's
 * `event_id`), or the run that made it (an upload, a tool result, a runner's file), is another audience's. Not when
 * the reading run's own event was given it: an operator's API event may re-use any file of the conversation.
 */
export function artifactOfOtherAudience(db: Db, reader: { runId: string; audience: string | null }): SQL {
  const [inputEvent, ofRun, runEvent] = [alias(eventLog, "artifact_input_event"), alias(run, "artifact_of_run"), alias(eventLog, "artifact_run_event")];
  const ofPrivateEvent = db
    .select({ one: sql`1` })
    .from(inputEvent)
    .where(and(eq(artifact.source, "input"), eq(inputEvent.eventId, sql`json_extract(${artifact.metadataJson}, '$.event_id')`), privateToOther(inputEvent.metadataJson, reader.audience)));
  const ofPrivateRun = db
    .select({ one: sql`1` })
    .from(ofRun)
    .innerJoin(runEvent, eq(runEvent.eventId, ofRun.eventId))
    .where(and(eq(ofRun.runId, artifact.runId), privateToOther(runEvent.metadataJson, reader.audience)));
  // Written out: drizzle has no json_each. The reader's event's input as recorded (ingress/accept.ts).
  const givenToReader = sql`EXISTS (SELECT 1 FROM run AS own_run JOIN event_log AS own_event ON own_event.event_id = own_run.event_id, json_each(own_event.input_json, '$.attachments') AS given
    WHERE own_run.run_id = ${reader.runId} AND json_extract(given.value, '$.artifact_id') = ${artifact.artifactId})`;
  return and(or(exists(ofPrivateEvent), exists(ofPrivateRun)), not(givenToReader))!;
}
