import type { Db } from "../src/db/client";
import { jsonByteLength } from "../src/protocol/common";
import type { RunJob } from "../src/run/job";
import type { RunOutcome } from "../src/stores/runs";
import type { RunTableStore } from "./run-table";
import type { StoredRun } from "./scheduling";
import type { SteeringQueue } from "./steering-queue";

/**
 * A chat message recalled or edited, as ingress found it (src/platforms/revise-waiting.ts): its event, the run that
 * holds it (its own, or the run it was `steered` into), and for an edit its words now and the edit's version.
 */
export interface MessageRevision {
  eventId: string;
  runId: string;
  steered: boolean;
  edit?: { text: string | null; version: number };
}

export type RevisionOutcome = "withdrawn" | "edited" | "untouched";

/** Why a run ends when its message is recalled before it began: `cancelled`, as any run dropped while it waited. */
const RECALLED_REASON = "its message was recalled before it was answered";
const RECALLED: RunOutcome = { status: "cancelled", errorCode: "cancelled", errorMessage: RECALLED_REASON, resultCount: 0 };

export interface RevisionDeps {
  db: Db;
  runs: RunTableStore;
  steering: SteeringQueue;
  /** Runs this instance executes or is cancelling: begun, or on their way out, and never changed. Asked in the same tick as the change. */
  busy: (runId: string) => boolean;
  /** A queued run ended `cancelled` for `reason`; whether this call ended it. */
  cancelQueued: (key: string, job: RunJob, reason: string) => Promise<boolean>;
  /** A run only libSQL knows (its hand-over still on its way) ended so, and that hand-over starts nothing; whether this call ended it. */
  endUnhanded: (runId: string, outcome: RunOutcome) => Promise<boolean>;
}

/**
 * A recall withdraws a message no runner has yet: its queued run is cancelled, or its claim taken off the steering
 * queue (`steering.dropped`, reason `recalled`). An edit gives it its new words, so it is answered as edited. A run
 * that has begun, a message already pulled, is never touched. Idempotent: a recall or an edit delivered again finds
 * the message gone, or the same words (an older edit arriving late changes nothing).
 */
export async function reviseWaiting(deps: RevisionDeps, change: MessageRevision): Promise<RevisionOutcome> {
  const entry = await deps.runs.find(change.runId);
  // Read by ingress as its own run's while its claim was being recorded: steered since, the claiming run holds it.
  const claimant = !change.steered && !entry ? await deps.steering.claimantOf(change.eventId) : null;
  if (claimant) return reviseWaiting(deps, { ...change, runId: claimant, steered: true });
  if (change.steered) {
    // The run it was steered into ended: its queue was dropped with it (or pulled).
    if (!entry) return "untouched";
    if (change.edit) return (await deps.steering.amend(change.runId, change.eventId, change.edit)) ? "edited" : "untouched";
    return (await deps.steering.withdraw(deps.db, entry[1].job, change.eventId)) ? "withdrawn" : "untouched";
  }
  // Not held here: ended (answered), or recorded with its hand-over still to come, which a recall ends now.
  if (!entry) return change.edit ? "untouched" : (await deps.endUnhanded(change.runId, RECALLED)) ? "withdrawn" : "untouched";
  return change.edit ? editOwnRun(deps, entry, change.edit) : recallOwnRun(deps, entry);
}

async function recallOwnRun(deps: RevisionDeps, [key, run]: [string, StoredRun]): Promise<RevisionOutcome> {
  // Messages claimed by this run wait in it: cancelling it would drop them unanswered, so it answers them, and this one.
  if (run.state !== "queued" || (await deps.steering.size(run.job.runId)) > 0) return "untouched";
  // No await from this check to cancelQueued's mark: the scheduler cannot start it in between (nor has it begun and ended since).
  if (deps.busy(run.job.runId) || !deps.runs.holdsNow(run.job.runId)) return "untouched";
  return (await deps.cancelQueued(key, run.job, RECALLED_REASON)) ? "withdrawn" : "untouched";
}

async function editOwnRun(deps: RevisionDeps, [key, run]: [string, StoredRun], edit: NonNullable<MessageRevision["edit"]>): Promise<RevisionOutcome> {
  // An album's run reads its items together (the caption as its text): one item's edit does not say what the whole reads.
  if (run.state !== "queued" || deps.busy(run.job.runId) || run.job.album) return "untouched";
  if ((run.revision ?? -Infinity) > edit.version) return "edited";
  const job: RunJob = { ...run.job, input: { ...run.job.input, text: edit.text } };
  // The mirror changes in this tick (the scheduler starts it with these words from now on); the output gate holds the answer until the write is durable.
  await deps.runs.put(key, { ...run, job, bytes: jsonByteLength(job), revision: edit.version });
  return "edited";
}
