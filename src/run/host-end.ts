import type { Db } from "../db/client";
import { hostRecordInsert } from "../stores/event-log";
import { runsStore, type RunOutcome } from "../stores/runs";
import type { RunJob } from "./job";

/**
 * Ends a run the host must close itself (lost session, host failure); the
 * `run.failed` EventLog record only when this write is what ended it.
 */
export async function endRunAsHost(db: Db, job: RunJob, outcome: RunOutcome): Promise<void> {
  const ended = await runsStore(db).finishStatement(job.runId, outcome).execute();
  if (!ended.length) return;
  await hostRecordInsert(db, {
    eventType: "run.failed",
    conversationKey: job.conversationKey,
    conversationId: job.conversation.conversation_id,
    runId: job.runId,
    data: { run_id: job.runId, runner_id: job.runner.runnerId, code: outcome.errorCode, error: outcome.errorMessage },
  }).run();
}
