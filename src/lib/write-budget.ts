/**
 * A run's writes of one kind so far, against a per-run limit: its state writes (`state.updated` results and
 * `state.set` calls together, RUN_MAX_STATE_UPDATES, so a runner held back on one path cannot go round it by the
 * other) or its `storage.set` calls (RUN_MAX_STORAGE_WRITES: each writes a value that outlives the run). Held by the
 * run's session, shared by its result stream and Host API calls; taken synchronously, so calls in flight together
 * never pass the limit together.
 */
export class WriteBudget {
  private taken = 0;

  /** Whether one more write fits in `limit`; counted when it does. */
  take(limit: number): boolean {
    if (this.taken >= limit) return false;
    this.taken++;
    return true;
  }

  /** A write taken that the database refused (not applied): it counts for nothing. */
  giveBack(): void {
    this.taken = Math.max(0, this.taken - 1);
  }
}
