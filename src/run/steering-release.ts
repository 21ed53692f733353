import { and, eq, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { insertWhere } from "../db/guarded";
import { eventLog, run } from "../db/schema";
import { currentAgentStatement } from "../stores/binding-resolution";
import { placeOfRun } from "../stores/event-log";
import { refusalOf } from "./claim";
import type { RunJob } from "./job";
import { jobAgentOf, jobRunnerOf } from "./job-parts";

/**
 * A steering claim taken back (durable-objects/steering-queue.ts `release`): the claimed event is `bound` to its own
 * run again and that run recorded as ingress recorded it, `created`, so it can be decided anew. Only a claim into
 * `claimedRunId` is taken back; a claim that was never applied leaves nothing to change. Idempotent.
 */
export function releaseStatements(db: Db, job: RunJob, claimedRunId: string) {
  const eventId = job.event.event_id;
  const place = placeOfRun(job);
  // `steering` is the host's key (README: metadata may not carry it): removing it gives back the metadata as received.
  const rebind = db
    .update(eventLog)
    .set({ disposition: "bound", runId: job.runId, metadataJson: sql`json_remove(${eventLog.metadataJson}, '$.steering')` })
    .where(and(eq(eventLog.eventId, eventId), eq(eventLog.disposition, "steered"), eq(eventLog.runId, claimedRunId)));
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
