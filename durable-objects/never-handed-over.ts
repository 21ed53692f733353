import type { Db } from "../src/db/client";
import { NEVER_HANDED_OVER } from "../src/run/host-end";
import type { RunTableStore } from "./run-table";
import type { SteeringQueue } from "./steering-queue";
import type { UnhandedRuns } from "./unhanded-runs";

export interface SweepDeps {
  db: Db;
  /** Runs this instance executes. */
  active: (runId: string) => boolean;
  runs: RunTableStore;
  steering: SteeringQueue;
  unhanded: UnhandedRuns;
  /** The scheduler looks (its alarm decides what waits to be decided anew). */
  wake: () => void;
  /** Work in turn with the conversation's decisions. */
  inTurn: <T>(work: () => Promise<T>) => Promise<T>;
}

/** The cron's sweep: of these runs ingress recorded long ago, those never handed over here end as failed. Answers how many it ended. */
export async function endNeverHandedOver(deps: SweepDeps, runIds: string[]): Promise<number> {
  const { db, runs, steering, unhanded } = deps;
  let ended = 0;
  // Each in turn with the decisions: a redelivery handing the run over is decided wholly before (then held here) or after (then it finds the run ended).
  for (const runId of runIds) {
    const end = async () => {
      // Held here (waiting its turn, or running; or its album's item) it stays.
      if (deps.active(runId) || (await runs.holds(runId))) return false;
      // Its new decision waiting (dropped unpulled, the database away; or its claim's writer died): the scheduler, woken, takes it.
      if (await steering.awaitsDecision(runId)) return (deps.wake(), false);
      // Its event claimed by a steering run, only the claim's write got no answer: the claim is completed instead.
      return !(await steering.completeClaim(db, runId)) && (await unhanded.end(db, runId, NEVER_HANDED_OVER));
    };
    if (await deps.inTurn(end)) ended++;
  }
  return ended;
}
