import type { PostingMarks } from "../src/delivery/posting-marks";
import { DeliverySession, type DeliveryDeps } from "../src/delivery/session";
import { loggedError } from "../src/lib/describe-error";
import { loggedId } from "../src/lib/log-text";
import { ADAPTERS } from "../src/platforms/registry";
import type { ApiResult } from "../src/platforms/types";
import { endRecordedMeanwhile } from "../src/run/host-end";
import type { RunJob } from "../src/run/job";
import { runsStore } from "../src/stores/runs";

const PREFIX = "reply:";
/** A reply's posting mark: "maybe" while a call that shows in the chat is on the wire or got no answer, "shown" once one was taken. */
const POSTED = "posted:";
type Posted = "maybe" | "shown";

/**
 * Chat replies of recorded runs still on their way (waiting out a rate limit, retrying), mirrored in the object's
 * storage until they settle: an instance that dies meanwhile (a restart, a deploy) leaves them to the next, which
 * sends the answer from the run's ledger, unless a platform had already taken part of it (its delivery trail) or may
 * have (its posting mark: a send on the wire when the instance died is in the chat though its outcome is recorded nowhere).
 */
export class PendingReplies implements PostingMarks {
  /** Replies this instance is delivering itself. */
  private readonly mine = new Set<string>();
  /** Posting marks of the replies this instance sends ("sending": marked for a call on the wire, before which nothing may show). */
  private readonly marks = new Map<string, Posted | "sending">();
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

  posting(runId: string): void {
    if (this.marks.has(runId)) return;
    this.marks.set(runId, "sending");
    // Not awaited and not `allowUnconfirmed`: the output gate holds the platform call until the mark is durable.
    void this.storage.put(`${POSTED}${runId}`, "maybe" satisfies Posted);
  }

  posted(runId: string, result: ApiResult<unknown>): void {
    const mark = this.marks.get(runId);
    // Settled meanwhile (a call that outlived its reply's settle window): its marks are gone with it.
    if (mark === undefined) return;
    if (result.ok) {
      if (mark !== "shown") void this.storage.put(`${POSTED}${runId}`, "shown" satisfies Posted);
      this.marks.set(runId, "shown");
    } else if (mark === "sending" && result.failure.maybeApplied) this.marks.set(runId, "maybe");
    else if (mark === "sending") {
      // Refused (a rate limit, say): nothing of the reply can show, so the next instance sends it all.
      this.marks.delete(runId);
      void this.storage.delete(`${POSTED}${runId}`);
    }
  }

  /**
   * Whether sending the reply anew could show twice what the chat may already show of it: a call of it was taken, or
   * may have been (on the wire when an earlier instance died, or unanswered), unless a repeat of that call is harmless
   * there (Lark drops a repeated uuid; Discord's first message edits its "thinking…" one, and nothing before it showed).
   */
  async wouldShowTwice(job: RunJob): Promise<boolean> {
    const mark = this.marks.get(job.runId) ?? (await this.storage.get<Posted>(`${POSTED}${job.runId}`));
    if (mark === undefined || mark === "shown") return mark === "shown";
    const surface = job.delivery ? ADAPTERS[job.delivery.target.platform].surface : null;
    return !(surface?.idempotentSends || surface?.awaitsAnswer);
  }

  /** An earlier instance's mark of a reply that has been dealt with (answered anew, or not sent again). */
  forget(runId: string): void {
    if (this.marks.has(runId)) return;
    void this.storage.delete(`${POSTED}${runId}`);
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
      this.marks.delete(job.runId);
      await this.storage.delete([key, `${POSTED}${job.runId}`]).catch(() => 0);
    });
  }

  /** Once per instance: the replies an earlier instance left unsettled, resumed (each one's settle to track). */
  async recover(deps: DeliveryDeps): Promise<Promise<void>[]> {
    if (this.recovered) return [];
    const resumed: Promise<void>[] = [];
    let current: RunJob | undefined;
    try {
      for (const [key, job] of await this.storage.list<RunJob>({ prefix: PREFIX })) {
        if (this.mine.has(job.runId)) continue;
        current = job;
        const delivered = (await this.wouldShowTwice(job)) || (await runsStore(deps.db).deliveredReply(job.conversationKey, job.runId));
        const reply: { session: DeliverySession | null } = { session: null };
        // The run's whole ledger, a page at a time, into a new reply (none for a run not ended, or one a platform had part of).
        const ended = delivered
          ? null
          : await endRecordedMeanwhile(deps.db, job.runId, 0, () => {
              reply.session = DeliverySession.open(deps, job);
              return (entries) => reply.session?.feed(entries);
            });
        if (ended === null || !reply.session) {
          await this.storage.delete([key, `${POSTED}${job.runId}`]);
          continue;
        }
        resumed.push(this.track(job, reply.session.settle(deps.config.DELIVERY_SETTLE_TIMEOUT_MS)));
      }
      this.recovered = true;
    } catch (err) {
      // The database is away: looked for again on the scheduler's next pass. Named by the reply it was at (every reply
      // here is of this object's conversation): an operator can tell which chat waits.
      console.error(`pending replies not resumed yet${current ? `; ${repliedIn(current)}` : ""}: ${loggedError(err)}`);
    }
    return resumed;
  }
}

/** Where a reply goes, as a log line names it (as end-log.ts names a run's). */
function repliedIn(job: RunJob): string {
  const { conversation_id: conversationId, bot_id: botId } = job.conversation;
  return [conversationId ? `conversation ${loggedId(conversationId)}` : null, botId ? `bot ${loggedId(botId)}` : null, `run ${job.runId}`].filter((n) => n !== null).join(", ");
}
