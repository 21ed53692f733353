import type { ConcurrencyStrategy } from "../src/agents/policy";
import type { RunJob } from "../src/run/job";

/**
 * When a stored run may start, relative to the other runs of its conversation:
 * - `after-all`: every run stored before it has ended (enqueue, arrival order);
 * - `after-running`: no run is running (interrupt: the active runs were cancelled);
 * - `now`: at once (parallel).
 */
export type StartRule = "after-all" | "after-running" | "now";

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

/** Whether the run at `index` may start now, ignoring its debounce. */
function ready(table: RunTable, index: number, running: (runId: string) => boolean): boolean {
  const [, run] = table[index];
  if (run.state !== "queued" || running(run.job.runId)) return false;
  switch (run.start) {
    case "now":
      return true;
    case "after-running":
      return !table.some(([, r]) => running(r.job.runId));
    case "after-all":
      return index === 0;
  }
}

/** The runs that may start now, in arrival order. `running` says which runs this instance executes. */
export function startable(table: RunTable, now: number, running: (runId: string) => boolean): [string, StoredRun][] {
  const out: [string, StoredRun][] = [];
  table.forEach(([key, run], i) => {
    if (run.notBefore <= now && ready(table, i, running)) out.push([key, run]);
  });
  return out;
}

/**
 * The run a new message is claimed by (PROTOCOL §10): the oldest active run,
 * counting a run still in its debounce window as active, if its runner steers.
 */
export function steeringTarget(table: RunTable, now: number, running: (runId: string) => boolean): StoredRun | undefined {
  const active = table.find(([, r], i) => running(r.job.runId) || (r.notBefore > now && ready(table, i, running)));
  return active && canSteer(active[1].job) ? active[1] : undefined;
}

