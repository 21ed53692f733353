import type { ConcurrencyStrategy } from "../src/agents/policy";
import type { RunJob } from "../src/run/job";

/**
 * When a stored run may start, relative to the other runs of its conversation:
 * - `after-all`: every run stored before it has ended (enqueue, arrival order);
 * - `after-running`: no run is running (interrupt: the active runs were cancelled);
 * - `now`: at once (parallel).
 */
export type StartRule = "after-all" | "after-running" | "now";

/** How each strategy's run starts: only an interrupting run overtakes the waiting ones, only a parallel one the running ones. */
export const START_RULE: Record<ConcurrencyStrategy, StartRule> = {
  steer: "after-all",
  enqueue: "after-all",
  reject: "after-all",
  interrupt: "after-running",
  parallel: "now",
};

export interface StoredRun {
  job: RunJob;
  state: "queued" | "running";
  start: StartRule;
  /** Debounce: not before this time (ms since the epoch). */
  notBefore: number;
}

/** Stored runs in arrival order (their storage keys sort by enqueue time). */
export type RunTable = ReadonlyArray<readonly [key: string, run: StoredRun]>;

/** Keys sort by enqueue time, so listing them gives arrival order. */
export const runKey = (job: RunJob) => `run:${String(job.enqueuedAt).padStart(15, "0")}:${job.runId}`;

/** Default strategy (PROTOCOL §10): steer when the runner supports it, else enqueue. */
export function strategyOf(job: RunJob): ConcurrencyStrategy {
  return job.agent.concurrency.strategy ?? (job.runner.capabilities.steering ? "steer" : "enqueue");
}

const canSteer = (job: RunJob) => job.runner.capabilities.steering === true;

/**
 * The runs that may start now, in arrival order. `running` says which runs
 * this instance executes. One pass in arrival order, where each run chosen
 * counts as running for the ones after it, so two runs that must take turns
 * never start together.
 */
export function startable(table: RunTable, now: number, running: (runId: string) => boolean): [string, StoredRun][] {
  const out: [string, StoredRun][] = [];
  let anyRunning = table.some(([, r]) => running(r.job.runId));
  table.forEach(([key, run], index) => {
    if (run.state !== "queued" || running(run.job.runId) || run.notBefore > now) return;
    const ready = run.start === "now" || (!anyRunning && (run.start === "after-running" || index === 0));
    if (!ready) return;
    out.push([key, run]);
    if (run.start !== "now") anyRunning = true;
  });
  return out;
}

/** Whether a queued run would start at once were its debounce over (it waits for no other run). */
function waitsOnlyForTime(table: RunTable, index: number, running: (runId: string) => boolean): boolean {
  const [, run] = table[index];
  if (run.state !== "queued" || running(run.job.runId)) return false;
  const anyRunning = table.some(([, r]) => running(r.job.runId));
  return run.start === "now" || (!anyRunning && (run.start === "after-running" || index === 0));
}

/**
 * The run a new message is claimed by (PROTOCOL §10): the oldest active run
 * of the same agent, counting a run still in its debounce window as active,
 * if its runner steers. Another agent's run never receives the message: one
 * event, one binding.
 */
export function steeringTarget(table: RunTable, now: number, running: (runId: string) => boolean, agentId: string): StoredRun | undefined {
  const active = table.find(([, r], i) => running(r.job.runId) || (r.notBefore > now && waitsOnlyForTime(table, i, running)));
  return active && canSteer(active[1].job) && active[1].job.agent.agentId === agentId ? active[1] : undefined;
}


/**
 * The next time a stored run waits for (undefined when none does): a queued
 * run's debounce, or the pause before a lost run is ended again.
 */
export function nextWakeAt(table: RunTable, now: number): number | undefined {
  const waiting = table.filter(([, r]) => r.notBefore > now).map(([, r]) => r.notBefore);
  return waiting.length ? Math.min(...waiting) : undefined;
}
