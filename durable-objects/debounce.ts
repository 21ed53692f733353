import type { RunJob } from "../src/run/job";
import type { RunTableStore } from "./run-table";
import type { StoredRun } from "./scheduling";

/**
 * A message of the burst claimed by `run` while it waits out its debounce pushes its start back: the run starts once the
 * burst has been quiet for `quietMs` (the agent's debounce_ms as it is now), and by its `waitLimit` at the latest. Null
 * when nothing changes: no debounce, the window already over (it waits only for its turn), or the limit reached.
 */
export function slidWindow(run: StoredRun, now: number, quietMs: number): StoredRun | null {
  if (run.waitLimit === undefined || run.notBefore <= now) return null;
  const notBefore = Math.min(now + quietMs, run.waitLimit);
  if (notBefore <= run.notBefore) return null;
  // An album's run is timed anew from its own wait when an item joins or one on its way is given up (album-gathering.ts): it waits this long too.
  const album = run.job.album && { ...run.job.album, waitUntil: Math.max(run.job.album.waitUntil ?? 0, notBefore) };
  return { ...run, notBefore, ...(album ? { job: { ...run.job, album } } : {}) };
}

/** `message`, claimed by the run `runId`, slides that run's window if it still waits (not `busy`: executing, being cancelled). */
export async function slideDebounce(runs: RunTableStore, runId: string, message: RunJob, now: number, busy: (runId: string) => boolean): Promise<void> {
  const entry = await runs.find(runId);
  // Checked and written in one tick: the scheduler cannot start it in between.
  const slid = entry && !busy(runId) && slidWindow(entry[1], now, message.agent.concurrency.debounce_ms ?? 0);
  if (slid) void runs.put(entry[0], slid); // the output gate holds the answer until it is durable
}
