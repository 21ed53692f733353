/**
 * Bounded work left after a run (a reply's last sends, MCP sessions' ends),
 * tracked so the alarm handler outlives it while the next run need not wait
 * for it; each piece that settles calls `onSettled` (the scheduler looks again).
 */
export class SettlingWork {
  private readonly pending = new Set<Promise<void>>();

  constructor(private readonly onSettled: () => void) {}

  get size(): number {
    return this.pending.size;
  }

  add(work: Promise<void>): void {
    const settled: Promise<void> = work.finally(() => {
      this.pending.delete(settled);
      this.onSettled();
    });
    this.pending.add(settled);
  }
}
