/**
 * The replies of one chat (one ConversationDO), kept in the order their runs
 * ended. A reply opened while an earlier run's reply is still on the wire
 * (waiting out a rate limit, retrying) makes its first platform call only
 * once that reply has settled, so answers reach the chat in the order of the
 * messages they answer. Runs are never held by this, only their replies; and
 * replies of runs that overlap (parallel runs) do not wait for each other.
 */
export class ReplyOrder {
  private readonly unsettled = new Set<Promise<unknown>>();

  /** What a reply opened now waits for: every reply whose run ended and that has not settled yet. */
  turn(): Promise<void> {
    return Promise.allSettled([...this.unsettled]).then(() => undefined);
  }

  /** A reply whose run ended is settling (`done`): replies opened from now on come after it. */
  settling(done: Promise<unknown>): void {
    this.unsettled.add(done);
    const forget = () => void this.unsettled.delete(done);
    done.then(forget, forget);
  }
}
