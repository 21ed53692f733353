import type { LedgerEntry } from "../stores/runs";

/**
 * Ledger rows one write of a run's results holds at most, beyond its last. A hold of short lines (1 MiB, ~8k rows) or
 * a flood's end written as one transaction keeps libSQL's single writer for 100-500 ms, every other conversation's
 * writes waiting behind it; in parts, theirs go in between.
 */
export const LEDGER_ROWS_PER_WRITE = 2048;

/**
 * Runner results whose ledger entry goes with rows of other tables its batch writes (a Transcript item, state, an
 * artifact's row, the run's end): never written apart from them, or a later write that fails would leave, say, an
 * answer in the ledger (and shown to followers and chat) that the Transcript never got.
 */
const WITH_OTHER_ROWS = new Set(["message.completed", "state.updated", "artifact.created", "run.completed", "run.failed"]);

/** Whether a ledger entry may be written ahead of the rest of its batch: nothing else of the batch goes with it. */
export function writableApart(entry: LedgerEntry): boolean {
  return !(entry.origin === "runner" && WITH_OTHER_ROWS.has(entry.type));
}

/**
 * A batch's ledger entries (in seq order) split for writing: the leading parts, each written alone and first, and the
 * rest, written with everything else of the batch (its transcript items, state, artifact rows; the run's end, for the
 * last batch). Only the entries before the first one `apart` refuses are split off (a flood of deltas or telemetry),
 * so no entry is written without the other rows that go with it; the rest, from there on, is one write whatever its
 * size, as every batch was before parts.
 */
export function splitLedgerWrites<T>(entries: T[], apart: (entry: T) => boolean): { leading: T[][]; rest: T[] } {
  const firstWithOthers = entries.findIndex((e) => !apart(e));
  const splittable = firstWithOthers < 0 ? entries.length : firstWithOthers;
  const leading: T[][] = [];
  let start = 0;
  for (; entries.length - start > LEDGER_ROWS_PER_WRITE && start + LEDGER_ROWS_PER_WRITE <= splittable; start += LEDGER_ROWS_PER_WRITE) leading.push(entries.slice(start, start + LEDGER_ROWS_PER_WRITE));
  return { leading, rest: entries.slice(start) };
}
