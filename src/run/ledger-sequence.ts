/**
 * The run ledger's `seq` counter for one run. Shared by the result processor
 * and the Host API (which records tool calls and model usage), both running
 * in the run's Durable Object: numbers are taken synchronously, so two
 * writers never collide on (run_id, seq).
 */
export class LedgerSequence {
  private last = 0;
  next(): number {
    return ++this.last;
  }
}
