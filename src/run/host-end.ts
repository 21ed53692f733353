import { sql, type SQL } from "drizzle-orm";
import { parseResultPayload } from "../protocol/results";
import { batchAll, type Db } from "../db/client";
import { mayHaveApplied } from "../db/executor";
import { insertWhere, insertWhereReturning } from "../db/guarded";
import { eventLog, runEvent } from "../db/schema";
import { loggedError } from "../lib/describe-error";
import { hostRecordValues, placeOfRun } from "../stores/event-log";
import { ledgerDrops, unauditedDropsInsert } from "./drop-records";
import { RunEndUnwritten } from "./end-unwritten";
import { ENDED, isNotStarted, ledgerEntryOf, runsStore, type LedgerEntry, type RunOutcome } from "../stores/runs";
import { transcriptInsertWhere, type NewTranscriptItem } from "../stores/transcript";
import type { RunJob } from "./job";
import { OVER_LIMIT_WARNING } from "./drop-audit-cap";
import { recordedEnd } from "./recorded-end";
import { logRunEnd, type RunEndFacts } from "./end-log";
import type { UnansweredEnds } from "./unanswered-ends";

/** What ending a run needs of it: a run job, or the facts of a run row. */
export interface HostEndTarget {
  runId: string;
  conversationKey: string;
  conversation: Pick<RunJob["conversation"], "conversation_id" | "thread_id" | "workspace_id" | "bot_id">;
  runner: { runnerId: string };
  /** Named on the run's log line when known. */
  agent?: { agentId: string };
  /** Its event's source (`api`, a platform), named on the run's log line when known. */
  event?: { source: string };
}

/** What the run's log line is told of it beyond the host's end (what its instance knew of its own end, if any). */
export type KnownOfRun = Pick<RunEndFacts, "calledAt" | "resultsRead" | "steered">;

/**
 * Ends a run the host must close itself (lost session, host failure, a
 * cancel before it started); its `run.failed` EventLog record and ledger
 * entry only when this write is what ended it, in the same batch, so they
 * are never split by a failure in between. `onlyQueued` ends it only if it
 * never started. `item` (the run's trailing artifacts, recordedEnd)
 * is written with them, on the same condition: never twice; with `drops` (the run's
 * count, or SQL counting them), the count of those without an audit (drop-records.ts, its own id) too, once; `cause`, why it
 * ended, and `known`, goes on the run's log line (logRunEnd), logged only when this write ended it. `unanswered`: the
 * instance's ends whose write got no answer, this one's kept there should it get none, and the one that ended the run
 * logged should this write find it ended. Returns the ledger entry it
 * wrote, for the run's live followers, or null when the run had already
 * ended: only a run ended here still owes a chat user a notice.
 */
export async function endRunAsHost(db: Db, target: HostEndTarget, outcome: RunOutcome, opts: { onlyQueued?: boolean; item?: NewTranscriptItem | null; drops?: number | SQL; cause?: unknown; known?: KnownOfRun; unanswered?: UnansweredEnds } = {}): Promise<LedgerEntry | null> {
  const endedAt = Date.now();
  const data = { code: outcome.errorCode, error: outcome.errorMessage, retryable: outcome.retryable ?? false };
  const record = hostRecordValues({
    eventType: "run.failed",
    ...placeOfRun(target),
    runId: target.runId,
    data: { run_id: target.runId, runner_id: target.runner.runnerId, code: outcome.errorCode, error: outcome.errorMessage },
  });
  // This write ended it if its terminal update changed the run (one that ended earlier is left as it was). Each
  // statement below runs right after the one it depends on, in one transaction: `changes()` is that one's count.
  // (Comparing the run's end time instead fails when two ends are written in the same millisecond.)
  const endedHere = sql`changes() = 1`;
  const ledgerEntry = insertWhereReturning(
    db,
    runEvent,
    {
      runId: target.runId,
      // After whatever an earlier instance recorded of the run.
      seq: sql`(SELECT COALESCE(MAX(${runEvent.seq}), 0) + 1 FROM ${runEvent} WHERE ${runEvent.runId} = ${target.runId})`,
      type: "run.failed",
      dataJson: JSON.stringify(data),
      runnerSequence: null,
      origin: "host",
      createdAt: endedAt,
    },
    endedHere,
    sql`${runEvent.seq}`,
  );
  const runs = runsStore(db);
  const finish = opts.onlyQueued ? runs.endQueuedStatement(target.runId, outcome, endedAt) : runs.finishAsHostStatement(target.runId, outcome, endedAt);
  // sqlite-proxy hands raw rows back as arrays of column values: the one row written, or none.
  // The item after the ledger entry, whose insert (one row, or none) is what `changes()` then counts.
  const item = opts.item ? [transcriptInsertWhere(db, opts.item, endedHere)] : [];
  // Last, unguarded: it has its own id, so one the run's own end wrote (applied unanswered) is not written again.
  const records = opts.drops === undefined ? [] : unauditedDropsInsert(db, { runId: target.runId, runnerId: target.runner.runnerId, place: placeOfRun(target) }, opts.drops);
  const facts: RunEndFacts = { ...opts.known, endedBy: "host", cause: opts.cause, endedAt };
  const [, , [written]] = (await batchAll(db, [finish, insertWhere(db, eventLog, record, endedHere), ledgerEntry, ...item, ...records]).catch((err: unknown) => {
    if (mayHaveApplied(err)) opts.unanswered?.note(target, { outcome, facts });
    throw err;
  })) as [unknown, unknown, unknown[][]];
  if (!written) {
    // Ended already: by an end of this instance whose write got no answer, maybe, whose line is logged now. Its
    // record says which (read only then); unreadable, an end that alone could have ended it is logged.
    if (opts.unanswered?.has(target.runId)) opts.unanswered.found(target.runId, await runs.get(target.runId).catch(() => undefined));
    return null;
  }
  opts.unanswered?.forget(target.runId);
  logRunEnd(target, outcome, facts);
  const seq = Number(written[0]);
  return { runId: target.runId, seq, type: "run.failed", data, runnerSequence: null, origin: "host", createdAt: endedAt };
}

/**
 * A run the host failed (the database refused a write it needs): ended as failed with `host.internal_error`, with the
 * item of the artifacts its ledger shows it announced after its last message (recordedEnd) and the count of its drops
 * without an audit, as its own end would have written them: of all the run saw when its own end's write failed (those
 * of writes never applied, that end's included), else of those its ledger holds.
 * `{ entry }` when recorded (entry null: it had ended already); null when even this write failed, and the
 * run is tried again or ended as lost.
 */
export async function endRunAfterHostFailure(db: Db, job: RunJob, err: unknown, unanswered?: UnansweredEnds): Promise<{ entry: LedgerEntry | null } | null> {
  // The host's own failure (its database, mostly), not the event's: sent again, it may well run.
  const outcome = { status: "failed" as const, errorCode: "host.internal_error", errorMessage: "the host failed to record the run", retryable: true };
  // The run's end line says why; a failure that did not end it (it had ended, or this write failed too) has its own.
  const unended = () => console.error(`run ${job.runId}: host failure: ${loggedError(err)}`);
  // The artifacts it announced after its last message keep their item (README, Artifacts); unreadable, the end is still written.
  const owed = await recordedEnd(db, job).catch((e: Error) => (console.error(`run ${job.runId}: trailing artifacts not read (${loggedError(e)})`), null));
  const drops = err instanceof RunEndUnwritten ? err.dropsSeen : ledgerDrops(job.runId);
  const unlogged = err instanceof RunEndUnwritten ? err.unlogged : undefined;
  // The run's own end, unanswered: should this write find the run ended, that end did it (nothing else ends a run its
  // instance executes), and its line is logged then.
  if (err instanceof RunEndUnwritten && err.unlogged && mayHaveApplied(err.cause)) unanswered?.note(job, err.unlogged);
  return endRunAsHost(db, job, outcome, { item: owed?.item, drops, cause: err, known: unlogged?.facts, unanswered }).then(
    (entry) => {
      if (!entry) unended();
      return { entry };
    },
    (e: Error) => (unended(), console.error(`run ${job.runId}: failure not recorded (${loggedError(e)}); the run is tried again or ended as lost`), null),
  );
}

/**
 * A run a host failure found already ended, most likely by its own final write, applied though its answer never
 * came: its status, or null when the record says it has not ended. The ledger entries after `afterSeq` (those its
 * followers and its reply have not had) go to the sink `publisher` gives once the run is known to have ended, a page
 * at a time: they may be more than one page (a long last batch; a whole run, lost with an earlier instance).
 */
export async function endRecordedMeanwhile(db: Db, runId: string, afterSeq: number, publisher: () => (entries: LedgerEntry[]) => void): Promise<string | null> {
  const store = runsStore(db);
  const row = await store.get(runId);
  if (!row || !(ENDED as readonly string[]).includes(row.status)) return null;
  const publish = publisher();
  // The warning that drops a result may come pages after it: a refused reference's is written after the whole batch,
  // which may hold thousands of rows. So every warning is read first (what each names, no more), then the pages.
  const warnings = dropWarnings(await store.warningsAfter(runId, afterSeq));
  for (let after = afterSeq; ; ) {
    const page = await store.ledger(runId, after, 1000);
    const entries = page.rows.map(ledgerEntryOf);
    markDropped(entries, warnings);
    if (entries.length) publish(entries);
    if (!page.hasMore || !page.rows.length) return row.status;
    after = page.rows[page.rows.length - 1].seq;
  }
}

/** What host warnings say was dropped. */
interface DropWarnings {
  /** The runner results they name (`ledger_seq`). */
  named: Set<number>;
  /** Those named past a cap (results.ts): a valid run.completed so named ended nothing, and is dropped whole. */
  overLimit: Set<number>;
}

/** DropWarnings from host warnings' data. */
function dropWarnings(warnings: ({ ledger_seq?: unknown; code?: unknown } | null)[]): DropWarnings {
  const found: DropWarnings = { named: new Set(), overLimit: new Set() };
  for (const warning of warnings) {
    if (typeof warning?.ledger_seq !== "number") continue;
    found.named.add(warning.ledger_seq);
    if (warning.code === OVER_LIMIT_WARNING) found.overLimit.add(warning.ledger_seq);
  }
  return found;
}

/** The warnings among `entries`. */
const warningsIn = (entries: LedgerEntry[]) => dropWarnings(entries.filter((e) => e.origin === "host" && e.type === "host.warning").map((e) => e.data as { ledger_seq?: unknown; code?: unknown } | null));

/**
 * The runner results the host dropped (invalid, unknown, refused), marked as they were when written: `dropped` is not
 * stored, but the host.warning reporting each names it by `ledger_seq` (`warnings`: those of the ledger after them,
 * else those among `entries`). A reply rebuilt from the ledger (a restart) then shows what the live reply would, never
 * a result the host refused.
 */
export function markDropped(entries: LedgerEntry[], warnings = warningsIn(entries)): void {
  const { named, overLimit } = warnings;
  if (!named.size) return;
  for (const e of entries) {
    if (e.origin !== "runner" || !named.has(e.seq)) continue;
    // A valid run.completed whose message alone was dropped still ended the run (ResultProcessor): not dropped itself.
    if (e.type === "run.completed" && !overLimit.has(e.seq) && parseResultPayload(e.type, e.data).kind === "ok") continue;
    e.dropped = true;
  }
}

/** An operator's cancel of a run whose hand-over to its conversation was lost. */
export const CANCELLED_UNHANDED: RunOutcome = { status: "cancelled", errorCode: "cancelled", errorMessage: "run cancelled before it reached its conversation" };
/** The cron's end of a run whose hand-over to its conversation was lost and never retried. */
export const NEVER_HANDED_OVER: RunOutcome = {
  status: "failed",
  errorCode: "host.not_handed_over",
  errorMessage: "the event was recorded but never reached its conversation, and was not retried",
};

/** Ends a run left queued in libSQL only (its hand-over to its conversation was lost); its `run.failed` entry when this ended it. */
export async function endUnhandedRun(db: Db, runId: string, outcome: RunOutcome, unanswered?: UnansweredEnds): Promise<LedgerEntry | null> {
  const row = await runsStore(db).get(runId);
  if (!isNotStarted(row?.status)) {
    // Ended already, perhaps by an end of this instance whose write got no answer (this one, tried before).
    if (row) unanswered?.found(runId, row);
    return null;
  }
  const target = { runId, conversationKey: row.conversationKey, conversation: { conversation_id: row.conversationId, thread_id: row.threadId, workspace_id: row.workspaceId, bot_id: row.botId }, runner: { runnerId: row.runnerId }, agent: { agentId: row.agentId } };
  return endRunAsHost(db, target, outcome, { onlyQueued: true, unanswered });
}

/** What a reply in progress hears when the host, not the runner, ended the run: a `run.failed` as the ledger would carry it. */
export function hostFailureEntry(job: RunJob, code: string): LedgerEntry {
  return { runId: job.runId, seq: 0, type: "run.failed", data: { code, message: "the host ended the run" }, origin: "host", createdAt: Date.now() };
}
