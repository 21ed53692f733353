import type { ClaimedRun } from "../src/run/claim";
import { RECALLED } from "../src/run/claim";
import type { RunJob } from "../src/run/job";
import { loggedError } from "../src/lib/describe-error";
import { answerClaimedInstead, RECALLED_REASON, type RevisionDeps } from "./waiting-revisions";

export interface StartDeps extends RevisionDeps {
  /** The run's claim (claim.ts RunClaims.take): `RECALLED`, not started, when `unlessRecalled` and its message was recalled. */
  take: (job: RunJob, unlessRecalled: boolean) => Promise<ClaimedRun | null | typeof RECALLED>;
  /** Work in turn with the conversation's decisions, as a recall's is. */
  inTurn: <T>(work: () => Promise<T>) => Promise<T>;
  /** The run was stopped meanwhile (cancelled, interrupted): it answers no claimed message now. */
  stopped: () => boolean;
}

/**
 * A run's claim as it starts, made unless the message it answers was recalled in libSQL with that recall's work here
 * never done (its call here failed, or the instance doing it died, and the platform has not sent it again yet). That
 * work is done now, as waiting-revisions.ts `recallOwnRun` would (the run active, its runner not called): the first
 * message it claimed takes the recalled one's place, and its start claims again with that one; or, none, it ends
 * `cancelled`. An album's run holding claimed messages answers its recalled first item all the same, as there.
 * Answers the claim and the job it was made with, "cancelled", or "later": that work's write was refused (its end, or
 * the swap's record), and the run waits to start again after a pause, as one whose cancel fails is left queued (not
 * failed for it: its user, who withdrew the message, would hear of a failure).
 */
export async function claimUnlessRecalled(deps: StartDeps, key: string, job: RunJob): Promise<{ claimed: ClaimedRun | null; job: RunJob } | "cancelled" | "later"> {
  const claimedAny = async (j: RunJob) => (await deps.steering.size(j.runId)) > 0;
  for (;;) {
    const claimed = await deps.take(job, !job.album || !(await claimedAny(job)));
    if (claimed !== RECALLED) return { claimed, job };
    const goesOn = await deps
      .inTurn(async () => {
        if (!deps.stopped() && (await claimedAny(job)) && (job.album || (await answerClaimedInstead(deps, key, job)) === "withdrawn")) return true;
        await deps.cancelQueued(key, job, RECALLED_REASON);
        return false;
      })
      .catch((err: unknown) => {
        // A run stopped meanwhile (an operator's cancel) fails as any start would: tried again, it would not be stopped.
        if (deps.stopped()) throw err;
        console.error(`run ${job.runId}: its recalled message not withdrawn yet: ${loggedError(err)}`);
        return "later" as const;
      });
    if (goesOn !== true) return goesOn === false ? "cancelled" : goesOn;
    job = deps.runs.current(key)?.job ?? job;
  }
}
