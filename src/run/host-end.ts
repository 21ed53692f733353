import { sql } from "drizzle-orm";
import { batchAll, type Db } from "../db/client";
import { insertWhere } from "../db/guarded";
import { eventLog, run, runEvent } from "../db/schema";
import { hostRecordValues } from "../stores/event-log";
import { runsStore, type LedgerEntry, type RunOutcome } from "../stores/runs";
import type { RunJob } from "./job";

/**
 * Ends a run the host must close itself (lost session, host failure, a
 * cancel before it started); its `run.failed` EventLog record and ledger
 * entry only when this write is what ended it, in the same batch, so they
 * are never split by a failure in between.
 * Returns whether it ended the run: a chat reply then still owes the user a
 * failure notice.
 */
export async function endRunAsHost(db: Db, job: RunJob, outcome: RunOutcome): Promise<boolean> {
  const endedAt = Date.now();
  const record = hostRecordValues({
    eventType: "run.failed",
    conversationKey: job.conversationKey,
    conversationId: job.conversation.conversation_id,
    runId: job.runId,
    data: { run_id: job.runId, runner_id: job.runner.runnerId, code: outcome.errorCode, error: outcome.errorMessage },
  });
  // This write ended it if the run now carries this write's end (a run ended earlier keeps its own).
  const endedHere = sql`EXISTS (SELECT 1 FROM ${run} WHERE ${run.runId} = ${job.runId} AND ${run.endedAt} = ${endedAt} AND ${run.errorCode} IS ${outcome.errorCode ?? null})`;
  const ledgerEntry = insertWhere(
    db,
    runEvent,
    {
      runId: job.runId,
      // After whatever an earlier instance recorded of the run.
      seq: sql`(SELECT COALESCE(MAX(${runEvent.seq}), 0) + 1 FROM ${runEvent} WHERE ${runEvent.runId} = ${job.runId})`,
      type: "run.failed",
      dataJson: JSON.stringify({ code: outcome.errorCode, error: outcome.errorMessage, retryable: false }),
      runnerSequence: null,
      origin: "host",
      createdAt: endedAt,
    },
    endedHere,
  );
  const [ended] = (await batchAll(db, [runsStore(db).finishStatement(job.runId, outcome, endedAt), insertWhere(db, eventLog, record, endedHere), ledgerEntry])) as [unknown[], unknown, unknown];
  return ended.length > 0;
}

/** What a reply in progress hears when the host, not the runner, ended the run: a `run.failed` as the ledger would carry it. */
export function hostFailureEntry(job: RunJob, code: string): LedgerEntry {
  return { runId: job.runId, seq: 0, type: "run.failed", data: { code, message: "the host ended the run" }, origin: "host", createdAt: Date.now() };
}
