/**
 * The result sequence numbers a run has seen, as sorted disjoint ranges: a
 * stream in order is one range, each number held back or skipped adds at
 * most one. Exact for any order (a late number is never taken for a
 * duplicate) while under `maxRanges`; the owner closes its lowest gap to stay there.
 */
export class SequenceSet {
  /** [first, last] of each run of consecutive numbers seen, ascending, never touching. */
  private readonly ranges: [number, number][] = [];

  constructor(private readonly maxRanges: number) {}

  has(n: number): boolean {
    const i = this.indexAfter(n) - 1;
    return i >= 0 && this.ranges[i][1] >= n;
  }

  /** How many runs of numbers are missing between 1 and the highest number seen. */
  gaps(): number {
    const first = this.ranges[0];
    return first ? this.ranges.length - (first[0] === 1 ? 1 : 0) : 0;
  }

  /** Adds `n` (not yet seen); false when that would leave more than `maxRanges` ranges, and nothing is added. */
  add(n: number): boolean {
    const r = this.ranges;
    const next = this.indexAfter(n);
    const before = next > 0 && r[next - 1][1] === n - 1;
    const after = next < r.length && r[next][0] === n + 1;
    if (before && after) {
      r[next - 1][1] = r[next][1];
      r.splice(next, 1);
    } else if (before) r[next - 1][1] = n;
    else if (after) r[next][0] = n;
    else {
      if (r.length >= this.maxRanges) return false;
      r.splice(next, 0, [n, n]);
    }
    return true;
  }

  /**
   * Counts the lowest missing run of numbers as seen, so the set holds one
   * gap fewer: memory stays bounded, and a number of it that comes later is
   * taken for a duplicate. Answers the numbers closed, or null when none is missing.
   */
  closeLowestGap(): [number, number] | null {
    const r = this.ranges;
    if (r.length === 0) return null;
    if (r[0][0] > 1) {
      const closed: [number, number] = [1, r[0][0] - 1];
      r[0][0] = 1;
      return closed;
    }
    if (r.length < 2) return null;
    const closed: [number, number] = [r[0][1] + 1, r[1][0] - 1];
    r[0][1] = r[1][1];
    r.splice(1, 1);
    return closed;
  }

  /** The index of the first range starting after `n` (binary search; in-order streams hit the last range at once). */
  private indexAfter(n: number): number {
    const r = this.ranges;
    if (r.length === 0 || r[r.length - 1][0] <= n) return r.length;
    let lo = 0;
    let hi = r.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (r[mid][0] > n) hi = mid;
      else lo = mid + 1;
    }
    return lo;
  }
}
