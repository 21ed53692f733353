import { DeliverySession, type DeliveryDeps } from "../src/delivery/session";
import { describeError } from "../src/lib/describe-error";
import { endRecordedMeanwhile } from "../src/run/host-end";
import type { RunJob } from "../src/run/job";
import { runsStore } from "../src/stores/runs";

const PREFIX = "reply:";

/**
 * Chat replies of recorded runs still on their way (waiting out a rate limit, retrying), mirrored in the object's
 * storage until they settle: an instance that dies meanwhile (a restart, a deploy) leaves them to the next, which
 * sends the answer from the run's ledger, unless a platform had already taken part of it (its delivery trail).
 */
export class PendingReplies {
  /** Replies this instance is delivering itself. */
  private readonly mine = new Set<string>();
  /** Whether this instance has looked for replies an earlier one left. */
  private recovered = false;

  constructor(private readonly storage: DurableObjectStorage) {}

  get size(): number {
    return this.mine.size;
  }

  /** Whether this instance has resumed every reply an earlier one left (false until `recover` could look). */
  get recoveredAll(): boolean {
    return this.recovered;
  }

  /**
   * A recorded run's reply, settling. Call it in the same tick as the run's table entry is deleted: both writes land
   * together, so a reply is either left here or its run is still stored (and ended as lost, which replies itself).
   */
  track(job: RunJob, settled: Promise<void>): Promise<void> {
    const key = `${PREFIX}${job.runId}`;
    this.mine.add(job.runId);
    void this.storage.put(key, job, { allowUnconfirmed: true });
    return settled.finally(async () => {
      this.mine.delete(job.runId);
      await this.storage.delete(key).catch(() => false);
    });
  }

  /** Once per instance: the replies an earlier instance left unsettled, resumed (each one's settle to track). */
  async recover(deps: DeliveryDeps): Promise<Promise<void>[]> {
    if (this.recovered) return [];
    const resumed: Promise<void>[] = [];
    try {
      for (const [key, job] of await this.storage.list<RunJob>({ prefix: PREFIX })) {
        if (this.mine.has(job.runId)) continue;
        const delivered = await runsStore(deps.db).deliveredReply(job.conversationKey, job.runId);
        const reply: { session: DeliverySession | null } = { session: null };
        // The run's whole ledger, a page at a time, into a new reply (none for a run not ended, or one a platform had part of).
        const ended = delivered
          ? null
          : await endRecordedMeanwhile(deps.db, job.runId, 0, () => {
              reply.session = DeliverySession.open(deps, job);
              return (entries) => reply.session?.feed(entries);
            });
        if (ended === null || !reply.session) {
          await this.storage.delete(key);
          continue;
        }
        resumed.push(this.track(job, reply.session.settle(deps.config.DELIVERY_SETTLE_TIMEOUT_MS)));
      }
      this.recovered = true;
    } catch (err) {
      // The database is away: looked for again on the scheduler's next pass.
      console.error(`pending replies not resumed yet: ${describeError(err)}`);
    }
    return resumed;
  }
}
