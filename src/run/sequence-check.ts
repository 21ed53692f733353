import { SequenceSet } from "./sequence-set";

/** Gaps a runner's sequence numbers may leave open; past it the lowest are closed, so the de-duplication stays exact and small. */
export const MAX_SEQUENCE_GAPS = 4096;

type Warn = (code: string, message: string, extra?: Record<string, unknown>) => void;

/** PROTOCOL §7 sequence handling for one run: duplicates dropped, gaps and reordering warned about, in bounded memory. */
export class SequenceCheck {
  private readonly numbers = new SequenceSet(MAX_SEQUENCE_GAPS + 2);
  private max = 0;
  /** Whether a gap was closed yet (closeLowestGap): warned about once. */
  private gapsClosed = false;

  /** Whether a result numbered `sequence` was taken already (its repeat would be dropped). */
  seen(sequence: number): boolean {
    return this.numbers.has(sequence);
  }

  /** Whether a result numbered `sequence` (positive) is taken: a number seen before is a duplicate, dropped. */
  accept(sequence: number, warn: Warn): boolean {
    if (this.numbers.has(sequence)) {
      warn("result.duplicate", `duplicate sequence ${sequence} dropped`, { sequence });
      return false;
    }
    if (sequence > this.max + 1) warn("result.sequence_gap", `sequence jumped from ${this.max} to ${sequence}`, { sequence });
    else if (sequence < this.max) warn("result.reordered", `sequence ${sequence} arrived after ${this.max}`, { sequence });
    // The set's own bound (one range more than the gaps allowed, whatever the first number) only backs the gap count up.
    if (!this.numbers.add(sequence)) {
      this.closeLowestGap(warn);
      this.numbers.add(sequence);
    }
    while (this.numbers.gaps() > MAX_SEQUENCE_GAPS) this.closeLowestGap(warn);
    this.max = Math.max(this.max, sequence);
    return true;
  }

  /**
   * Too many numbers skipped (a runner counting in steps, or numbering what it
   * never sends): the lowest gap is closed, so memory stays bounded and the
   * run goes on. A number of it that still comes is dropped as a duplicate.
   */
  private closeLowestGap(warn: Warn) {
    const closed = this.numbers.closeLowestGap();
    if (!closed || this.gapsClosed) return;
    this.gapsClosed = true;
    warn("result.gaps_closed", `more than ${MAX_SEQUENCE_GAPS} sequence gaps open: the lowest are closed, and a number in them that still comes (from ${closed[0]} up) is dropped as a duplicate`);
  }
}
