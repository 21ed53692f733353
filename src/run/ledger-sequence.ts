import type { LedgerEntry } from "../stores/runs";

/**
 * The run ledger's `seq` counter for one run. Shared by the result processor
 * and the Host API (which records tool calls and model usage), both running
 * in the run's Durable Object: numbers are taken synchronously, so two
 * writers never collide on (run_id, seq).
 *
 * The run's end is recorded last. Once the runner's stream is over, calls
 * still in flight are stopped and given a moment to record how they ended;
 * then the Host API numbers nothing more, and the end waits for the records
 * numbered before it.
 */
export class LedgerSequence {
  private last = 0;
  private openToHost = true;
  private readonly hostWrites = new Set<Promise<unknown>>();
  private readonly calls = new Set<Promise<unknown>>();
  /** Host API records whose write got no answer (it may have been applied): the run's end gives followers those the ledger holds. */
  readonly unansweredHostRecords: LedgerEntry[] = [];

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

  /** Host API calls in flight. */
  get callsInFlight(): number {
    return this.calls.size;
  }

  /** A Host API call in flight: the run's end may wait for it to record how it ended. */
  track<T>(call: Promise<T>): Promise<T> {
    const forget = () => void this.calls.delete(tracked);
    const tracked: Promise<void> = call.then(forget, forget);
    this.calls.add(tracked);
    return call;
  }

  /**
   * No more Host API records, after calls in flight have had up to
   * `waitForCallsMs` to end (they should have been stopped); resolves once
   * the records already numbered are written (or failed).
   */
  async closeToHost(waitForCallsMs = 0): Promise<void> {
    if (this.openToHost && waitForCallsMs > 0 && this.calls.size) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([Promise.all(this.calls), new Promise((r) => (timer = setTimeout(r, waitForCallsMs)))]);
      clearTimeout(timer);
    }
    this.openToHost = false;
    await Promise.all(this.hostWrites);
  }
}
