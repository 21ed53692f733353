import type { Db } from "../src/db/client";
import { isNotStarted, runsStore } from "../src/stores/runs";
import type { RunTableStore } from "./run-table";
import type { DispatchResult } from "./scheduling";
import type { SteeringQueue } from "./steering-queue";

/**
 * What an event handed over again was decided already, or null when it is still to be decided: one ingress read as
 * not started (a redelivery), or whose claim was taken back (from a dead instance's write, or dropped unpulled:
 * dropped-claims.ts). Claimed by a steering run when the claim's write got no answer: that claim is completed, not made
 * again (taken back if its writer died). Decided since (steered or rejected: its run row is gone; superseded, started
 * or ended), which the run table cannot tell: a duplicate.
 */
export async function decidedAlready(db: Db, steering: SteeringQueue, runs: RunTableStore, runId: string): Promise<DispatchResult | null> {
  const claimedBy = await steering.completeClaim(db, runId);
  if (claimedBy) return { disposition: "steered", runId: claimedBy };
  if (!(await runs.find(runId)) && !isNotStarted((await runsStore(db).get(runId))?.status)) return { disposition: "duplicate", runId };
  return null;
}
