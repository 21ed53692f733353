/** Timed waits that can all be ended early at once (a reply abandoned at its settle bound stops waiting). */
export class Naps {
  private readonly wakers = new Set<() => void>();

  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.wakers.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      this.wakers.add(wake);
    });
  }

  /** Every wait in progress ends now. */
  wakeAll(): void {
    for (const wake of [...this.wakers]) wake();
  }
}
