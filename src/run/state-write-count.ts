/**
 * A run's state writes so far, `state.updated` results and `state.set` calls together: both take from one budget
 * (RUN_MAX_STATE_UPDATES), so a runner held back on one path cannot go round it by the other. Shared by the run's
 * result stream and its Host API calls (its session); taken synchronously, so calls in flight together never pass
 * the limit together.
 */
export class StateWriteCount {
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
