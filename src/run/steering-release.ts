import { and, eq, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { insertWhere } from "../db/guarded";
import { eventLog, run, transcript } from "../db/schema";
import { currentAgentStatement } from "../stores/binding-resolution";
import { placeOfRun } from "../stores/event-log";
import { refusalOf } from "./claim";
import { withEditedText } from "./edited-input";
import type { RunJob } from "./job";
import { jobAgentOf, jobRunnerOf } from "./job-parts";

/**
 * A steering claim taken back (durable-objects/steering-queue.ts `release`): the claimed event is `bound` to its own
 * run again and that run recorded as ingress recorded it, `created`, so it can be decided anew. Only a claim into
 * `claimedRunId` is taken back; a claim that was never applied leaves nothing to change. Idempotent. `unlessRecalled`
 * (a dropped claim): nothing is taken back once its user recalled the message (its transcript item's
 * `metadata.recalled`), checked in the write itself: a recall recorded first leaves it steered and unanswered, one
 * recorded after finds it waiting in its own run, where the recall reaches it (src/platforms/revise-waiting.ts).
 */
export function releaseStatements(db: Db, job: RunJob, claimedRunId: string, opts: { unlessRecalled?: boolean } = {}) {
  const eventId = job.event.event_id;
  const place = placeOfRun(job);
  const recalled = sql`EXISTS (SELECT 1 FROM ${transcript} WHERE ${transcript.eventId} = ${eventId} AND ${transcript.role} = 'user' AND json_type(${transcript.metadataJson}, '$.recalled') IS NOT NULL)`;
  // `steering` is the host's key (README: metadata may not carry it): removing it gives back the metadata as received.
  const rebind = db
    .update(eventLog)
    .set({ disposition: "bound", runId: job.runId, metadataJson: sql`json_remove(${eventLog.metadataJson}, '$.steering')` })
    .where(and(eq(eventLog.eventId, eventId), eq(eventLog.disposition, "steered"), eq(eventLog.runId, claimedRunId), opts.unlessRecalled ? sql`NOT ${recalled}` : undefined));
  const ownRun = insertWhere(
    db,
    run,
    {
      runId: job.runId,
      eventId,
      ...place,
      agentId: job.agent.agentId,
      runnerId: job.runner.runnerId,
      // As ingress writes them: the agent's state epoch ("" for none; unknown for a job stored before epochs), the history's newest item.
      agentEpoch: job.agent.stateEpoch === undefined ? null : (job.agent.stateEpoch ?? ""),
      latestTranscriptSeq: job.latestTranscriptSeq ?? 0,
      status: "created",
      // Ingress records the event and its run at one time.
      createdAt: sql`(SELECT ${eventLog.createdAt} FROM ${eventLog} WHERE ${eventLog.eventId} = ${eventId})`,
    },
    sql`EXISTS (SELECT 1 FROM ${eventLog} WHERE ${eventLog.eventId} = ${eventId} AND ${eventLog.runId} = ${job.runId} AND ${eventLog.disposition} = 'bound') AND NOT EXISTS (SELECT 1 FROM ${run} WHERE ${run.runId} = ${job.runId})`,
  );
  return [rebind, ownRun];
}

/**
 * A dropped claim's event as its agent is now (durable-objects/dropped-claims.ts), to be decided anew as an event
 * arriving now would be (its strategy, its runner's steering); null when that agent can no longer answer it (deleted,
 * created anew under its id, disabled, its runner no longer registered). Throws when the database cannot say.
 */
export async function asAgentIsNow(db: Db, job: RunJob): Promise<RunJob | null> {
  const [current] = await currentAgentStatement(db, job.agent.agentId).execute();
  if (refusalOf(current, job) || !current.runner || !current.service) return null;
  return { ...job, agent: jobAgentOf(current.agent), runner: jobRunnerOf(current.runner, current.service) };
}

/**
 * A dropped claim's event with the words its user last gave the message (its transcript item's `metadata.edited`):
 * an edit made after the drop never reached the job kept for it. Read once the claim is taken back, so an edit
 * recorded later finds the message waiting in its own run (or claimed anew), where the edit reaches it.
 */
export async function asLastEdited(db: Db, job: RunJob): Promise<{ job: RunJob; revision?: number }> {
  const [item] = await db
    .select({ content: transcript.content, version: sql<unknown>`json_extract(${transcript.metadataJson}, '$.edited.version')` })
    .from(transcript)
    .where(and(eq(transcript.eventId, job.event.event_id), eq(transcript.role, "user"), sql`json_type(${transcript.metadataJson}, '$.edited') IS NOT NULL`))
    .limit(1);
  if (!item) return { job };
  // Its version goes with the words: an older edit arriving late (the platform's retry) finds them newer and changes nothing.
  return { job: { ...job, input: withEditedText(job.input, item.content) }, revision: typeof item.version === "number" ? item.version : undefined };
}
