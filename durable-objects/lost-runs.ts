import type { RunJob } from "../src/run/job";
import { loggedError } from "../src/lib/describe-error";
import type { RunTableStore } from "./run-table";

/**
 * The scheduler's sweep of runs lost with an earlier instance: stored as running, executed by no instance now (this one
 * executes those `isActive` names). Each is ended as lost (`finish`); one whose end cannot be recorded yet (the database
 * is unreachable) is tried again after `pauseMs` (its notBefore wakes the alarm), not on the platform's few alarm retries.
 */
export async function endLostRuns(runs: RunTableStore, isActive: (runId: string) => boolean, finish: (key: string, job: RunJob) => Promise<void>, pauseMs: number): Promise<void> {
  for (const [key, run] of await runs.entries()) {
    if (run.state !== "running" || isActive(run.job.runId)) continue;
    await finish(key, run.job).catch(async (err: Error) => {
      console.error(`run ${run.job.runId}: lost run not ended yet: ${loggedError(err)}`);
      await runs.put(key, { ...run, notBefore: Date.now() + pauseMs });
    });
  }
}
