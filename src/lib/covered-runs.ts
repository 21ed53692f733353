/**
 * The stretches of a text that secrets cover, as matches are found in reading order (each ends at or after the one
 * before): overlapping or touching ones are one stretch, shown as one `[redacted]`. Found in the text as sent, so a
 * secret inside another (or inside the marker that replaced one) adds nothing.
 */
export class CoveredRuns {
  private readonly starts: number[] = [];
  private readonly ends: number[] = [];
  /** Stretches before this one were taken (`shift`). */
  private first = 0;

  /** Covers [start, end); `end` is at least every end added before. */
  add(start: number, end: number): void {
    while (this.starts.length > this.first && this.ends[this.ends.length - 1] >= start) {
      start = Math.min(start, this.starts.pop()!);
      this.ends.pop();
    }
    this.starts.push(start);
    this.ends.push(end);
  }

  get size(): number {
    return this.starts.length - this.first;
  }

  /** The first stretch's start (Infinity when none). */
  get nextStart(): number {
    return this.size ? this.starts[this.first] : Infinity;
  }

  /** Takes the first stretch, as [start, end). */
  shift(): [number, number] {
    const run: [number, number] = [this.starts[this.first], this.ends[this.first]];
    this.first++;
    // Taken stretches are let go once they are half the lists: a long stream keeps only what it holds.
    if (this.first > 32 && this.first * 2 > this.starts.length) {
      this.starts.splice(0, this.first);
      this.ends.splice(0, this.first);
      this.first = 0;
    }
    return run;
  }

  clear(): void {
    this.starts.length = 0;
    this.ends.length = 0;
    this.first = 0;
  }
}
