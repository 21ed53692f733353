/**
 * The replies of one chat (one ConversationDO), kept in the order their runs
 * ended. A reply opened while an earlier run's reply is still on the wire
 * (waiting out a rate limit, retrying) makes its first platform call only
 * once that reply has settled, so answers reach the chat in the order of the
 * messages they answer. Runs are never held by this, only their replies; and
 * replies of runs that overlap (parallel runs) do not wait for each other.
 *
 * Each reply settling has a bound (when its settle window closes at the
 * latest): a reply waiting its turn gets its whole window after the replies
 * before it, and the scheduler counts the bounds before starting a run whose
 * reply must settle within the alarm's wall time.
 */
export interface ReplyTurn {
  /** Resolves when every reply before this one has settled. */
  done: Promise<void>;
  /** By when they have, at the latest (ms since the epoch; 0 when none). */
  bound: number;
}

export class ReplyOrder {
  private readonly unsettled = new Map<Promise<unknown>, number>();

  /** What a reply opened now waits for: every reply whose run ended and that has not settled yet. */
  turn(): ReplyTurn {
    return { done: Promise.allSettled([...this.unsettled.keys()]).then(() => undefined), bound: this.busyUntil() };
  }

  /** A reply whose run ended is settling (`done`), by `bound` at the latest: replies opened from now on come after it. */
  settling(done: Promise<unknown>, bound: number): void {
    this.unsettled.set(done, bound);
    const forget = () => void this.unsettled.delete(done);
    done.then(forget, forget);
  }

  /** When the replies settling now will all have settled, at the latest (0 when none is). */
  busyUntil(): number {
    return Math.max(0, ...this.unsettled.values());
  }
}
