import { DeliverySession, type DeliveryDeps } from "../delivery/session";
import { runsStore, type LedgerEntry } from "../stores/runs";
import { endRunAsHost } from "./host-end";
import type { RunJob } from "./job";

/**
 * Ends a run whose session is gone (`host.session_lost`) and, for a chat run
 * this write ended, tells the user. The run's own reply, when this instance
 * still has it (the run could not record its end), knows what it showed and
 * says so itself. Without it, a new session tells the user the run failed,
 * unless a platform had accepted some of the reply (its delivery trail).
 * Its `run.failed` goes to the run's live followers. Returns the session to settle.
 */
export async function endLostRun(deps: DeliveryDeps, job: RunJob, kept: DeliverySession | undefined, publish: (entries: LedgerEntry[]) => void): Promise<DeliverySession | null> {
  // Abandoned meanwhile (its settle timed out during a long outage), it can no longer say anything.
  const reply = kept?.usable ? kept : undefined;
  const delivered = !reply && job.delivery ? await runsStore(deps.db).deliveredReply(job.conversationKey, job.runId) : false;
  const outcome = { status: "failed" as const, errorCode: "host.session_lost", errorMessage: "the host instance running this run lost its state", resultCount: 0 };
  const ended = await endRunAsHost(deps.db, job, outcome);
  if (ended) publish([ended]);
  return ended && !delivered ? DeliverySession.failureNotice(deps, job, "host.session_lost", reply) : null;
}
