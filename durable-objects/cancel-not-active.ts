import { writeAll, type Db } from "../src/db/client";
import { CANCELLED_UNHANDED } from "../src/run/host-end";
import type { RunJob } from "../src/run/job";
import { joinDecisions } from "../src/run/welcome-decisions";
import type { RunTableStore } from "./run-table";
import { endedAtOnce, type CancelOutcome } from "./scheduling";
import type { SteeringQueue } from "./steering-queue";
import type { UnhandedRuns } from "./unhanded-runs";

export interface CancelDeps {
  db: Db;
  runs: RunTableStore;
  /** Runs this instance executes. */
  active: (runId: string) => boolean;
  steering: SteeringQueue;
  unhanded: UnhandedRuns;
  /** A run stored as running that no instance executes now, ended as lost. */
  finishLost: (key: string, job: RunJob) => Promise<void>;
  /** A queued run ended `cancelled` for `reason` (one an instance now gone had claimed ends as lost); whether this call ended it. */
  cancelQueued: (key: string, job: RunJob, reason: string) => Promise<boolean>;
}

/** An operator's cancel of a run this instance does not execute, in turn with the decisions; null when it is active (started meanwhile). */
export async function cancelNotActive(deps: CancelDeps, runId: string, because?: string): Promise<CancelOutcome | null> {
  // A welcome's joins go with it, recorded merged into it first: one whose own write failed would otherwise be welcomed
  // on its own when Slack sends it again. (Written again by its start, should the scheduler start it meanwhile; a
  // failure fails the cancel, the welcome left waiting.)
  const waiting = await deps.runs.find(runId);
  if (waiting?.[1].state === "queued" && waiting[1].job.joined?.events.length && !deps.active(runId)) await writeAll(deps.db, joinDecisions(deps.db, waiting[1].job));
  const entry = await deps.runs.find(runId);
  if (deps.active(runId)) return null; // nothing awaits from here to cancelQueued's mark
  if (!entry) return endedAtOnce(!(await deps.steering.completeClaim(deps.db, runId)) && (await deps.unhanded.end(deps.db, runId, CANCELLED_UNHANDED))); // an unanswered claim of its event is completed (run discarded), as the sweep does
  // Stored as running, not executed here: lost with an earlier instance, it ends as lost. (Null: the scheduler started it meanwhile.)
  if (entry[1].state === "running") return deps.finishLost(entry[0], entry[1].job).then(() => ({ cancelled: false }));
  // Another cancel may have ended it meanwhile: only one answers that it cancelled.
  return endedAtOnce(await deps.cancelQueued(entry[0], entry[1].job, `run cancelled before it started${because ? `: ${because}` : ""}`));
}
