import { eq } from "drizzle-orm";
import type { Db } from "../db/client";
import { eventLog } from "../db/schema";
import type { SteeringInputItem } from "../protocol/host-api-results";
import { hostRecordInsert, hostRecordValues, placeOfRun, type HostRecord } from "../stores/event-log";
import type { RunJob } from "./job";

/** The steering item a claimed event becomes (PROTOCOL §8 SteeringInputItem). */
export function steeringItemOf(event: RunJob, claimedBy: Pick<RunJob, "runId"> & { runner: Pick<RunJob["runner"], "runnerId"> }, claimedAt: number): SteeringInputItem {
  return {
    claimed_run_id: claimedBy.runId,
    runner_id: claimedBy.runner.runnerId,
    claimed_at: new Date(claimedAt).toISOString(),
    event: event.event,
    input: event.input,
    conversation: event.conversation,
    actor: event.actor,
    subject: event.subject,
    metadata: { event_seq: event.eventSeq, transcript_seq: event.transcriptSeq },
  };
}

/** The EventLog metadata a claim records on the claimed event. */
export function claimMetadata(item: SteeringInputItem) {
  return {
    steering: {
      status: "queued",
      trigger_behavior: "absorbed_into_active_run",
      claimed_by_run_id: item.claimed_run_id,
      claimed_runner_id: item.runner_id,
      claimed_at: item.claimed_at,
    },
  };
}

/** What an outcome record needs of a claim: small, so the queue keeps it apart from the (up to 1 MiB) message itself. */
export interface ClaimRef {
  event_id: string;
  claimed_run_id: string;
  runner_id: string;
  claimed_at: string;
}

export const claimRefOf = (item: SteeringInputItem): ClaimRef => ({
  event_id: item.event.event_id,
  claimed_run_id: item.claimed_run_id,
  runner_id: item.runner_id,
  claimed_at: item.claimed_at,
});

/** `steering.injected` (pulled by the run) or `steering.dropped` (never pulled before the run ended, or `reason: "recalled"`: its user recalled it first). */
export function steeringOutcomeInsert(db: Db, outcome: "injected" | "dropped", item: ClaimRef, run: RunJob, reason?: "recalled") {
  const rec = steeringOutcomeRecord(outcome, item, run, reason);
  if (outcome === "injected") return hostRecordInsert(db, rec);
  // A claim dropped after a pull whose injected record applied unanswered (the item put back, or orphaned by a restart):
  // that pull's answer never reached the runner, so the record says what became of the message: dropped.
  const { eventType, dataJson, metadataJson } = hostRecordValues(rec);
  return db.insert(eventLog).values(hostRecordValues(rec)).onConflictDoUpdate({ target: eventLog.eventId, set: { eventType, dataJson, metadataJson }, setWhere: eq(eventLog.eventType, "steering.injected") });
}

/** The EventLog record of a claim's outcome. */
export function steeringOutcomeRecord(outcome: "injected" | "dropped", item: ClaimRef, run: RunJob, reason?: "recalled"): HostRecord {
  return {
    eventType: `steering.${outcome}`,
    ...placeOfRun(run),
    runId: run.runId,
    data: { source_event_id: item.event_id, run_id: item.claimed_run_id, runner_id: item.runner_id, claimed_at: item.claimed_at, ...(reason ? { reason } : {}) },
    // One outcome per claim: a write that went unanswered (and is retried, or its item put back and taken again) records nothing twice.
    onceAs: `hev_steering_${item.claimed_run_id}_${item.event_id}`,
  };
}
