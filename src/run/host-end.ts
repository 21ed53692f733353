import type { Db } from "../db/client";
import { hostRecordInsert } from "../stores/event-log";
import { runsStore, type LedgerEntry, type RunOutcome } from "../stores/runs";
import type { RunJob } from "./job";

/**
 * Ends a run the host must close itself (lost session, host failure); the
 * `run.failed` EventLog record only when this write is what ended it.
 * Returns whether it did: a chat reply then still owes the user a failure notice.
 */
export async function endRunAsHost(db: Db, job: RunJob, outcome: RunOutcome): Promise<boolean> {
  const ended = await runsStore(db).finishStatement(job.runId, outcome).execute();
  if (!ended.length) return false;
  await hostRecordInsert(db, {
    eventType: "run.failed",
    conversationKey: job.conversationKey,
    conversationId: job.conversation.conversation_id,
    runId: job.runId,
    data: { run_id: job.runId, runner_id: job.runner.runnerId, code: outcome.errorCode, error: outcome.errorMessage },
  }).run();
  return true;
}

/** What a reply in progress hears when the host, not the runner, ended the run: a `run.failed` as the ledger would carry it. */
export function hostFailureEntry(job: RunJob, code: string): LedgerEntry {
  return { runId: job.runId, seq: 0, type: "run.failed", data: { code, message: "the host ended the run" }, origin: "host", createdAt: Date.now() };
}
