import type { Db } from "../db/client";
import { DeliverySession } from "../delivery/session";
import type { Config } from "../env";
import { runsStore } from "../stores/runs";
import { endRunAsHost } from "./host-end";
import type { RunJob } from "./job";

/**
 * Ends a run whose instance lost it (`host.session_lost`). Its reply's
 * session was lost too: for a chat run that this write ended, a new session
 * tells the user it failed, unless a platform had accepted some of its reply.
 * Returns that session, to settle.
 */
export async function endLostRun(deps: { db: Db; config: Config }, job: RunJob): Promise<DeliverySession | null> {
  const delivered = job.delivery ? await runsStore(deps.db).deliveredReply(job.conversationKey, job.runId) : true;
  const outcome = { status: "failed" as const, errorCode: "host.session_lost", errorMessage: "the host instance running this run lost its state", resultCount: 0 };
  const ended = await endRunAsHost(deps.db, job, outcome);
  return ended && !delivered ? DeliverySession.failureNotice(deps, job, "host.session_lost") : null;
}
