import { DurableObject } from "cloudflare:workers";
import { dbOf } from "../src/db/connect";
import { configOf, type Env } from "../src/env";
import { randomToken, sha256Hex } from "../src/lib/crypto";
import { handleHostApiCall, type HostApiReply } from "../src/host-api/handle";
import { invalidToken } from "../src/host-api/errors";
import { authorizeUpload, type UploadAuthorization } from "../src/host-api/upload";
import { claimRun, executeRun } from "../src/run/execute";
import type { RunJob } from "../src/run/job";
import { frameOf, LiveHub } from "../src/run/live";
import { freezeSnapshot } from "../src/run/snapshot";
import { RunnerCallError } from "../src/runner/errors";
import { hostRecordInsert } from "../src/stores/event-log";
import { runsStore, type RunOutcome } from "../src/stores/runs";
import { RunSession } from "./run-session";

interface StoredRun {
  job: RunJob;
  state: "queued" | "running";
}

/** An alarm handler gets 15 minutes of wall time; leave a margin. */
const ALARM_BUDGET_MS = 14 * 60_000;
/** Watchdog margin past a run's deadline before its alarm declares the session lost. */
const WATCHDOG_GRACE_MS = 5_000;
const REPLAY_PAGE = 500;

// Keys sort by enqueue time, so listing them gives arrival order.
const runKey = (job: RunJob) => `run:${String(job.enqueuedAt).padStart(15, "0")}:${job.runId}`;

/**
 * One object per conversation key: the only place that decides what happens
 * to an event of its conversation. It owns the run session registry (tokens,
 * frozen snapshots) and the run queue. Runs execute inside the alarm handler,
 * which the platform keeps alive and retries, guarded by the run's status so a
 * redelivered alarm never runs one twice.
 */
export class ConversationDO extends DurableObject<Env> {
  private readonly sessions = new Map<string, RunSession>();
  private readonly live = new LiveHub();
  private draining = false;

  /** Accept a run for this conversation. Idempotent by run id. */
  async dispatch(job: RunJob): Promise<{ disposition: "started" | "queued" }> {
    const key = runKey(job);
    const waiting = await this.ctx.storage.list<StoredRun>({ prefix: "run:" });
    if (!waiting.has(key)) this.ctx.storage.put(key, { job, state: "queued" } satisfies StoredRun);
    const ahead = [...waiting.keys()].filter((k) => k < key).length + this.sessions.size;
    // Storage writes are not awaited one by one: the output gate holds the reply until they are durable.
    if (!this.draining) this.ctx.storage.setAlarm(Date.now());
    return { disposition: ahead === 0 ? "started" : "queued" };
  }

  override async alarm(): Promise<void> {
    // A second delivery while this instance drains finds the work already taken.
    if (this.draining) return;
    this.draining = true;
    const startedAt = Date.now();
    try {
      for (;;) {
        const runs = await this.ctx.storage.list<StoredRun>({ prefix: "run:" });
        let next: [string, RunJob] | undefined;
        for (const [key, stored] of runs) {
          // Nothing runs in this instance between iterations, so a "running" entry is an orphan.
          if (stored.state === "running") await this.finishLost(key, stored.job);
          else next ??= [key, stored.job];
        }
        if (!next) break;
        if (Date.now() - startedAt + configOf(this.env).RUN_DEADLINE_MS > ALARM_BUDGET_MS) {
          // The next run might outlive this invocation: continue in a fresh one.
          await this.ctx.storage.setAlarm(Date.now());
          return;
        }
        await this.runOne(next[0], next[1]);
      }
      await this.ctx.storage.deleteAlarm();
    } finally {
      this.draining = false;
    }
  }

  /** A run's Host API call; the token is checked here, against the hash of the live session. */
  async hostApi(runId: string, token: string, body: unknown): Promise<HostApiReply> {
    const session = this.sessions.get(runId);
    const valid = session ? await session.verify(token) : false;
    if (!session || !valid) return { status: 401, json: JSON.stringify(invalidToken().toBody()) };
    return handleHostApiCall(
      { db: dbOf(this.env), config: configOf(this.env), snapshot: session.snapshot, artifacts: this.env.ARTIFACTS, steering: { pull: async () => [] } },
      body,
    );
  }

  /** artifact.upload: the token and snapshot are checked here; the Worker then streams the body to R2 itself. */
  async authorizeUpload(runId: string, token: string): Promise<UploadAuthorization> {
    const session = this.sessions.get(runId);
    if (!session || !(await session.verify(token))) return { ok: false, reply: { status: 401, json: JSON.stringify(invalidToken().toBody()) } };
    return authorizeUpload({ db: dbOf(this.env), snapshot: session.snapshot });
  }

  /** SSE of a run's results: the ledger so far, then live frames until the run ends. */
  async subscribe(runId: string): Promise<ReadableStream<Uint8Array>> {
    const sub = this.live.subscribe(runId);
    const runs = runsStore(dbOf(this.env));
    const active = this.sessions.has(runId) || (await this.isQueued(runId));
    const frames = [];
    for (let after = 0; ; ) {
      const page = await runs.ledger(runId, after, REPLAY_PAGE);
      for (const row of page.rows) frames.push(frameOf({ ...row, data: JSON.parse(row.dataJson), origin: row.origin as "runner" | "host" }));
      if (!page.hasMore || page.rows.length === 0) break;
      after = page.rows[page.rows.length - 1].seq;
    }
    sub.replayed(frames);
    if (!active) this.live.endOne(runId, sub, (await runs.get(runId))?.status ?? "unknown");
    return sub.readable;
  }

  /** Operator cancel: aborts an active run, or drops a queued one. */
  async cancel(runId: string): Promise<{ cancelled: boolean }> {
    const session = this.sessions.get(runId);
    if (session) {
      session.abort.abort(new RunnerCallError("cancelled", "run cancelled by an operator"));
      return { cancelled: true };
    }
    const runs = await this.ctx.storage.list<StoredRun>({ prefix: "run:" });
    for (const [key, stored] of runs) {
      if (stored.job.runId !== runId) continue;
      await this.ctx.storage.delete(key);
      await runsStore(dbOf(this.env)).finishStatement(runId, { status: "cancelled", errorCode: "cancelled", errorMessage: "run cancelled before it started", resultCount: 0 }).run();
      this.live.end(runId, "cancelled");
      return { cancelled: true };
    }
    return { cancelled: false };
  }

  private async isQueued(runId: string): Promise<boolean> {
    const runs = await this.ctx.storage.list<StoredRun>({ prefix: "run:" });
    return [...runs.values()].some((r) => r.job.runId === runId);
  }

  private async runOne(key: string, job: RunJob): Promise<void> {
    const db = dbOf(this.env);
    const config = configOf(this.env);
    const deadlineAt = Date.now() + config.RUN_DEADLINE_MS;
    const snapshot = await freezeSnapshot(job, deadlineAt);
    const state = await claimRun(db, job, snapshot);
    if (!state) {
      // Already taken by an earlier trigger (or cancelled): never run twice.
      await this.ctx.storage.delete(key);
      return;
    }
    await this.ctx.storage.put(key, { job, state: "running" } satisfies StoredRun);
    const token = randomToken();
    const abort = new AbortController();
    this.sessions.set(job.runId, new RunSession(job, snapshot, await sha256Hex(token), abort));
    const timer = setTimeout(() => abort.abort(new RunnerCallError("deadline_exceeded", `run exceeded its deadline of ${config.RUN_DEADLINE_MS} ms`)), deadlineAt - Date.now());
    // Watchdog: if this object dies mid-run, the alarm finds the orphan and ends it.
    await this.ctx.storage.setAlarm(deadlineAt + WATCHDOG_GRACE_MS);

    let status: string = "failed";
    try {
      const outcome = await executeRun({
        db,
        artifacts: this.env.ARTIFACTS,
        config,
        job,
        snapshot,
        state,
        token,
        signal: abort.signal,
        publish: (entries) => this.live.publish(job.runId, entries),
      });
      status = outcome.status;
    } catch (err) {
      // Only host-side failures reach here (the database refused the final write).
      console.error(`run ${job.runId}: host failure: ${(err as Error).message}`);
      await this.endWithoutSession(job, { status: "failed", errorCode: "host.internal_error", errorMessage: "the host failed to record the run", resultCount: 0 });
    } finally {
      clearTimeout(timer);
      this.sessions.delete(job.runId);
      await this.ctx.storage.delete(key);
      this.live.end(job.runId, status);
    }
  }

  private async finishLost(key: string, job: RunJob): Promise<void> {
    await this.endWithoutSession(job, {
      status: "failed",
      errorCode: "host.session_lost",
      errorMessage: "the host instance running this run lost its state",
      resultCount: 0,
    });
    await this.ctx.storage.delete(key);
  }

  private async endWithoutSession(job: RunJob, outcome: RunOutcome): Promise<void> {
    const db = dbOf(this.env);
    await db.batch([
      runsStore(db).finishStatement(job.runId, outcome),
      hostRecordInsert(db, {
        eventType: "run.failed",
        conversationKey: job.conversationKey,
        conversationId: job.conversation.conversation_id,
        runId: job.runId,
        data: { run_id: job.runId, runner_id: job.runner.runnerId, code: outcome.errorCode, error: outcome.errorMessage },
      }),
    ]);
  }
}
