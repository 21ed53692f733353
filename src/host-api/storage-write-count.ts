/**
 * A run's `storage.set` calls so far, against RUN_MAX_STORAGE_WRITES: each writes up to STORAGE_MAX_VALUE_BYTES that
 * outlives the run, so a runner looping on it would otherwise fill the database for the run's whole deadline. Taken
 * synchronously, so calls in flight together never pass the limit together. `storage.delete` takes nothing.
 */
export class StorageWriteCount {
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
