/**
 * The run ledger's `seq` counter for one run. Shared by the result processor
 * and the Host API (which records tool calls and model usage), both running
 * in the run's Durable Object: numbers are taken synchronously, so two
 * writers never collide on (run_id, seq).
 *
 * Once the runner's stream is over the run's end is recorded last: the Host
 * API numbers nothing more (a call cut short by the end records nothing
 * after it), and the end waits for the records numbered before it.
 */
export class LedgerSequence {
  private last = 0;
  private openToHost = true;
  private readonly hostWrites = new Set<Promise<unknown>>();

  next(): number {
    return ++this.last;
  }

  /** A Host API record's number, or null once the run is ending; `write` is tracked until it settles. */
  hostRecord<T>(count: number, write: (seqs: number[]) => Promise<T>): Promise<T> | null {
    if (!this.openToHost) return null;
    const pending = write(Array.from({ length: count }, () => this.next()));
    const forget = () => void this.hostWrites.delete(tracked);
    const tracked: Promise<void> = pending.then(forget, forget);
    this.hostWrites.add(tracked);
    return pending;
  }

  /** No more Host API records; resolves once those already numbered are written (or failed). */
  async closeToHost(): Promise<void> {
    this.openToHost = false;
    await Promise.all(this.hostWrites);
  }
}
