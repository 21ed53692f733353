/**
 * Ledger rows one write of a run's results holds at most, beyond its last. A hold of short lines (1 MiB, ~8k rows) or
 * a flood's end written as one transaction keeps libSQL's single writer for 100-500 ms, every other conversation's
 * writes waiting behind it; in parts, theirs go in between.
 */
export const LEDGER_ROWS_PER_WRITE = 2048;

/**
 * A batch's ledger entries (in seq order) split for writing: the leading parts, each written alone and first, and the
 * rest (at most LEDGER_ROWS_PER_WRITE), written with everything else of the batch (its transcript items, state,
 * artifact rows; the run's end, for the last batch), so nothing but ledger rows is ever written apart.
 */
export function splitLedgerWrites<T>(entries: T[]): { leading: T[][]; rest: T[] } {
  const leading: T[][] = [];
  let start = 0;
  for (; entries.length - start > LEDGER_ROWS_PER_WRITE; start += LEDGER_ROWS_PER_WRITE) leading.push(entries.slice(start, start + LEDGER_ROWS_PER_WRITE));
  return { leading, rest: entries.slice(start) };
}
