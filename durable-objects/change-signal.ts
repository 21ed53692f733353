/**
 * What wakes the scheduler inside its alarm: something changed (a run ended,
 * a dispatch or a cancel arrived), or the time it asked to be woken at came.
 */
export class ChangeSignal {
  /** Something changed that the scheduler has not looked at yet. */
  private pending = false;
  private wake?: () => void;

  /** Something changed: a waiting scheduler wakes, a busy one finds it on its next wait. */
  notify(): void {
    this.pending = true;
    this.wake?.();
  }

  /** Whether something changed that the scheduler has not looked at yet. */
  get changed(): boolean {
    return this.pending;
  }

  /** The scheduler is looking at everything now. */
  seen(): void {
    this.pending = false;
  }

  /** Resolves at the next change, or at `until` (ms since the epoch) if that comes first. */
  next(until?: number): Promise<void> {
    if (this.pending) return Promise.resolve();
    let timer: ReturnType<typeof setTimeout> | undefined;
    return new Promise<void>((resolve) => {
      this.wake = resolve;
      if (until !== undefined) timer = setTimeout(resolve, Math.max(0, until - Date.now()));
    }).finally(() => {
      clearTimeout(timer);
      this.wake = undefined;
    });
  }
}
