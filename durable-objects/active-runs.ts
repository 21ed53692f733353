import { RunnerCallError } from "../src/runner/errors";
import type { CancelOutcome } from "./scheduling";

/**
 * An operator's cancel of a run this instance executes: aborted (one starting sees it before calling its runner), or,
 * already done or stopped, answered once its end is recorded; null if it is not active here. `because`: why, added to
 * its error message (an agent deleted).
 */
export function abortActive(active: ReadonlyMap<string, { abort: AbortController; done: Promise<void> }>, finishing: ReadonlySet<string>, runId: string, because?: string): Promise<CancelOutcome> | null {
  const run = active.get(runId);
  if (!run) return null;
  if (finishing.has(runId) || run.abort.signal.aborted) return run.done.then(() => ({ cancelled: false }));
  run.abort.abort(new RunnerCallError("cancelled", `run cancelled by an operator${because ? `: ${because}` : ""}`));
  return Promise.resolve({ cancelled: true, status: "cancelling" });
}
