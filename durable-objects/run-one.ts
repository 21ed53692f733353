import { dbOf } from "../src/db/connect";
import { artifactsOf } from "../src/artifacts/bucket";
import { configOf, type Env } from "../src/env";
import { DeliverySession, type DeliveryDeps } from "../src/delivery/session";
import { executeRun } from "../src/run/execute";
import { RunEndUnwritten } from "../src/run/end-unwritten";
import { removeUnnamedBlobs } from "../src/run/unnamed-blobs";
import type { UnloggedEnd } from "../src/run/end-log";
import type { UnansweredEnds } from "../src/run/unanswered-ends";
import type { RunClaims } from "../src/run/claim";
import { endRecordedMeanwhile, endRunAfterHostFailure } from "../src/run/host-end";
import { publishHostEnd, type UnrecordedRun } from "../src/run/lost-run";
import { strategyOf, type RunJob } from "../src/run/job";
import type { LiveHub } from "../src/run/live";
import { freezeSnapshot } from "../src/run/snapshot";
import { RUN_ENDED, RunnerCallError } from "../src/runner/errors";
import { runsStore, type LedgerEntry } from "../src/stores/runs";
import type { CancelNotices } from "./cancel-notices";
import type { PendingReplies } from "./pending-replies";
import { claimUnlessRecalled } from "./recalled-at-start";
import type { SessionRegistry } from "./run-session";
import type { RunTableStore } from "./run-table";
import type { StoredRun } from "./scheduling";
import type { SettlingWork } from "./settling-work";
import type { SteeringQueue } from "./steering-queue";
import type { RevisionDeps } from "./waiting-revisions";

/** What a run's execution reaches in its conversation's object (conversation.ts). */
export interface RunOneDeps {
  env: Env;
  sessions: SessionRegistry;
  live: LiveHub;
  runs: RunTableStore;
  steering: SteeringQueue;
  claims: RunClaims;
  settling: SettlingWork;
  replies: PendingReplies;
  cancelNotices: CancelNotices;
  /** Active runs whose runner's stream is over: they can only end now. */
  finishing: Set<string>;
  /** Runs that could not record how they ended, for their end as lost to take their reply from. */
  unrecordedReplies: Map<string, UnrecordedRun>;
  /** Ends whose write got no answer, logged by whoever finds the run ended so (unanswered-ends.ts). */
  unanswered: UnansweredEnds;
  revisionDeps: Omit<RevisionDeps, "db">;
  inTurn: <T>(work: () => Promise<T>) => Promise<T>;
  /** Ends a run an instance took and lost (one end at a time per run). */
  finishLost: (key: string, job: RunJob) => Promise<void>;
  deliveryDeps: () => DeliveryDeps;
  armWatchdog: (options?: DurableObjectSetAlarmOptions) => Promise<void>;
  /** Claimed messages the run never pulled are recorded dropped. */
  dropUnpulled: (run: RunJob) => Promise<void>;
}

/** The runner's stream is over: the run can only end now, and its Host API calls in flight (a model stream, a tool call) end with it. */
export function streamEnded(finishing: Set<string>, runId: string, abort: AbortController): void {
  finishing.add(runId);
  if (!abort.signal.aborted) abort.abort(RUN_ENDED);
}

/** One run, from its claim to its recorded end (or, unrecorded, its entry left for the alarm to retry or end as lost). */
export async function runOne(deps: RunOneDeps, key: string, stored: StoredRun, abort: AbortController): Promise<void> {
  let { job } = stored;
  const db = dbOf(deps.env);
  const config = configOf(deps.env);
  const deadlineAt = Date.now() + config.RUN_DEADLINE_MS;
  // From the start: a database call that hangs while the run starts is bounded too.
  const timer = setTimeout(() => abort.abort(new RunnerCallError("deadline_exceeded", `run exceeded its deadline of ${config.RUN_DEADLINE_MS} ms`)), config.RUN_DEADLINE_MS);
  let status = "failed";
  let recorded = true;
  let delivery: DeliverySession | null = null;
  let publishedUpTo = 0;
  // The line of its own end, whose write got no answer: the end as lost logs it, should it find that end applied.
  let unlogged: UnloggedEnd | undefined;
  const publish = (entries: LedgerEntry[]) => {
    for (const e of entries) publishedUpTo = Math.max(publishedUpTo, e.seq);
    deps.live.publish(job.runId, entries);
    delivery?.feed(entries);
  };
  try {
    // Its message recalled, that recall's work here not done: done now (recalled-at-start.ts).
    const start = await claimUnlessRecalled({ ...deps.revisionDeps, db, take: (j, unlessRecalled) => deps.claims.take(db, j, unlessRecalled), inTurn: deps.inTurn, stopped: () => abort.signal.aborted }, key, job);
    if (start === "cancelled") return void (status = "cancelled");
    if (start === "later") return void (recorded = false); // that recall's work not written: it waits, queued, and starts again (below)
    const { claimed } = start;
    job = start.job;
    if (claimed) {
      deps.live.track(job.runId);
      // Taken now, it had not ended: an end of it whose write got no answer was not applied.
      deps.unanswered.forget(job.runId);
    }
    if (!claimed) {
      // Already taken by an earlier trigger (or cancelled): never run twice. Still "running": an instance took it and died before its mark below was durable.
      const row = await runsStore(db).get(job.runId);
      status = row?.status ?? "unknown";
      // Ended by an end of this instance whose write got no answer (a cancel's, the host's): its line is logged now.
      if (row && status !== "running") deps.unanswered.found(job.runId, row);
      if (status === "running") {
        await deps.finishLost(key, job);
        status = "failed";
      } else if (status === "cancelled") await deps.cancelNotices.owed(job, true); // its cancel's write applied unanswered
      return;
    }
    // As it stands now, read in the tick it is marked running: an edit of its message made while it was claimed applies.
    stored = deps.runs.current(key) ?? stored;
    // Unconfirmed: the runner call must not wait for this flush. Lost with the instance, the entry stays "queued" and the branch above ends it as lost.
    void deps.runs.put(key, { ...stored, state: "running" }, { allowUnconfirmed: true });
    // The agent as it is now: an edit made while the run was queued applies to it.
    job = { ...stored.job, agent: claimed.job.agent, runner: claimed.job.runner };
    const snapshot = freezeSnapshot(job, deadlineAt, claimed.stateScopes, claimed.descriptors, { holdsClaims: strategyOf(job) !== "steer" && (await deps.steering.size(job.runId)) > 0 });
    // Chat platform events: the reply follows the ledger as it is written (null otherwise).
    delivery = DeliverySession.open(deps.deliveryDeps(), job);
    const { session, token } = await deps.sessions.open(job, snapshot, abort);
    void deps.armWatchdog({ allowUnconfirmed: true });
    // A run cancelled while starting reaches executeRun aborted: its runner is never called.
    const outcome = await executeRun({
      db, artifacts: artifactsOf(deps.env), config, job, snapshot, state: claimed.state, historyBefore: claimed.historyBefore, token, runner: claimed.runner, signal: abort.signal, ledgerSequence: session.ledgerSequence, stateWrites: session.stateWrites,
      onStreamEnd: () => streamEnded(deps.finishing, job.runId, abort),
      steered: () => session.steered,
      publish,
    });
    status = outcome.status;
  } catch (err) {
    // Only host-side failures reach here (the database refused a write the run needs).
    const ended = await endRunAfterHostFailure(db, job, err, deps.unanswered);
    recorded = ended !== null;
    if (!recorded && err instanceof RunEndUnwritten) unlogged = err.unlogged;
    // Ended already (its final write applied, unanswered): followers and the reply hear how, with what it recorded.
    const meanwhile = ended && !ended.entry ? await endRecordedMeanwhile(db, job.runId, publishedUpTo, () => publish).catch(() => null) : null;
    if (meanwhile) status = meanwhile;
    // Followers see the record; the user hears of it (through the reply in progress, or a session of its own).
    if (ended?.entry) {
      await publishHostEnd(db, job.runId, publishedUpTo, ended.entry, (entries) => deps.live.publish(job.runId, entries));
      delivery = DeliverySession.failureNotice(deps.deliveryDeps(), job, "host.internal_error", delivery ?? undefined);
    }
    // Ended, the run's writes that got no answer can no longer land: the blobs no row of them names are removed.
    if (recorded && err instanceof RunEndUnwritten) await removeUnnamedBlobs(db, artifactsOf(deps.env), job.runId, err.blobs);
  } finally {
    streamEnded(deps.finishing, job.runId, abort);
    clearTimeout(timer);
    // Unregister first so no pull races the drop; delete the entry so no new claim targets this run.
    const ending = deps.sessions.get(job.runId);
    deps.sessions.delete(job.runId);
    // Its reply may still be on the wire: settling before any await here, the next run's reply comes after it (ReplyOrder).
    if (delivery) deps.settling.add(recorded ? deps.replies.track(job, delivery.settle(config.DELIVERY_SETTLE_TIMEOUT_MS)) : delivery.settle(config.DELIVERY_SETTLE_TIMEOUT_MS));
    // Unrecorded, the entry stays ("running": its terminal write is retried as an orphan's, which takes its reply from unrecordedReplies; "queued", it failed starting: after a pause), and so do its followers and claims.
    if (recorded) {
      // Unconfirmed: the output gate does not hold the stream's end for this flush. Lost, the entry comes back "running"; finishLost finds it ended.
      void deps.runs.delete(key, { allowUnconfirmed: true });
      deps.claims.forget(job.runId);
      deps.live.end(job.runId, status);
      await deps.dropUnpulled(job);
    } else if (deps.runs.current(key)?.state !== "running") await deps.runs.put(key, { ...(deps.runs.current(key) ?? stored), notBefore: Date.now() + config.DB_RETRY_PAUSE_MS });
    else deps.unrecordedReplies.set(job.runId, { reply: delivery ?? undefined, publishedUpTo, unlogged });
    if (ending) deps.settling.add(ending.close(db, config.DB_WRITE_RETRY_PAUSES_MS));
  }
}
