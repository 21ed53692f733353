import { DeliverySession, type DeliveryDeps } from "../src/delivery/session";
import { loggedError } from "../src/lib/describe-error";
import { ADAPTERS } from "../src/platforms/registry";
import type { RunJob } from "../src/run/job";
import { runsStore } from "../src/stores/runs";
import type { PendingReplies } from "./pending-replies";

/**
 * The notice of a run the host cancelled before it started, on a surface still showing a placeholder for it (Discord's
 * "thinking…"), tracked as any reply (a restart leaves it to the next instance); `settling` takes its settle.
 */
export class CancelNotices {
  constructor(
    private readonly deps: () => DeliveryDeps,
    private readonly replies: PendingReplies,
    private readonly settling: (settled: Promise<void>) => void,
    private readonly settleTimeoutMs: () => number,
  ) {}

  /** For a run this write ended cancelled. */
  send(job: RunJob): void {
    const notice = DeliverySession.cancelNotice(this.deps(), job);
    if (notice) this.settling(this.replies.track(job, notice.settle(this.settleTimeoutMs())));
  }

  /**
   * For a run still held here found ended: cancelled, its cancel's write applied with its answer lost (or lost with an
   * earlier instance before the notice was tracked), nothing told the chat. Sent if the run's record says cancelled and
   * no reply of it was delivered. `knownCancelled`: its start just read so; should the database then not say whether a
   * reply was delivered, sent all the same (repeated, it edits the placeholder to the same words). Otherwise a database
   * that cannot say sends nothing: the run may have answered, and the notice would overwrite the answer's first message.
   */
  async owed(job: RunJob, knownCancelled = false): Promise<void> {
    if (!job.delivery || !ADAPTERS[job.delivery.target.platform].surface.awaitsAnswer) return;
    const runs = runsStore(this.deps().db);
    const status = knownCancelled ? Promise.resolve(true) : runs.get(job.runId).then((row) => row?.status === "cancelled");
    const [cancelled, delivered] = await Promise.all([status, runs.deliveredReply(job.conversationKey, job.runId)]).catch((err: Error) => {
      console.error(`run ${job.runId}: cancel notice ${knownCancelled ? "sent unchecked" : "not sent"}: ${loggedError(err)}`);
      return [knownCancelled, false];
    });
    if (cancelled && !delivered) this.send(job);
  }
}
