import type { RunJob } from "../src/run/job";
import { RunnerCallError } from "../src/runner/errors";
import type { RunTableStore } from "./run-table";
import { supersededByInterrupt, supersedes, type RunTable, type StoredRun } from "./scheduling";

/** What an interrupt reaches in its conversation's object. */
export interface InterruptDeps {
  runs: RunTableStore;
  /** Runs this instance executes, by run id. */
  active: ReadonlyMap<string, { abort: AbortController }>;
  /** Ends a run that never started as cancelled (its claimed messages dropped). */
  cancelQueued: (key: string, job: RunJob, reason: string) => Promise<boolean>;
  /** A run it stops: the messages it claimed and never pulled are dropped and not decided anew (steering-queue.ts `moot`). */
  moot: (runId: string) => void;
}

/**
 * An interrupting event of `job`'s agent (README "A busy conversation"): the active runs it supersedes end cancelled,
 * and so do the waiting ones (scheduling.ts `supersededByInterrupt`); another agent's runs, and notifications', go on.
 * Answers the table as the new run meets it (the runs it aborted are ending: they keep it waiting no more), and the
 * new run as `waiting` makes it: within the earliest debounce limit of the waiting runs it superseded, since the burst
 * they were waiting out goes on in it.
 */
export async function interrupt(deps: InterruptDeps, table: RunTable, job: RunJob, waiting: (waitLimit?: number) => StoredRun): Promise<{ table: RunTable; stored: StoredRun }> {
  const isActive = (runId: string) => deps.active.has(runId);
  const superseded = supersededByInterrupt(table, job, Date.now(), isActive);
  // Marked first: each one's drop, whenever it comes, finds the mark.
  for (const [, run] of table.filter(([, r]) => supersedes(job)(r) && deps.active.has(r.job.runId))) {
    deps.moot(run.job.runId);
    deps.active.get(run.job.runId)?.abort.abort(new RunnerCallError("cancelled", "run interrupted by a newer event in its conversation"));
  }
  for (const [, run] of superseded) deps.moot(run.job.runId);
  // All at once: each is marked as being cancelled before the first write is awaited, so the scheduler never starts one
  // while another's end is recorded. The first failure is the decision's (the runs it left are cancelled next time).
  const cancels = await Promise.allSettled(superseded.map(([key, run]) => deps.cancelQueued(key, run.job, "superseded by a newer event in its conversation")));
  for (const c of cancels) if (c.status === "rejected") throw c.reason;
  const limits = superseded.map(([, r]) => r.waitLimit).filter((t) => t !== undefined);
  const now = (await deps.runs.entries()).filter(([, r]) => !deps.active.get(r.job.runId)?.abort.signal.aborted);
  return { table: now, stored: waiting(limits.length ? Math.min(...limits) : undefined) };
}
