import type { HostRecord } from "../stores/event-log";
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

/** The run's end is written with the last write whatever became of its result. */
const TERMINAL = new Set(["run.completed", "run.failed"]);

/**
 * Whether a ledger entry may be written ahead of the rest of its batch: nothing else of the batch goes with it. A
 * result the host dropped brings no row but its audit, written with it (auditsOf; checked, its references too, before
 * the batch is split), so a runner cannot keep its flood in one write by sending one ahead of it; a terminal one stays
 * with the run's end.
 */
export function writableApart(entry: LedgerEntry): boolean {
  if (entry.origin !== "runner" || !WITH_OTHER_ROWS.has(entry.type)) return true;
  return entry.dropped === true && !TERMINAL.has(entry.type);
}

/**
 * A batch's ledger entries (in seq order) split for writing: the leading parts, each written alone and first, and the
 * rest, written with everything else of the batch (its transcript items, state, artifact rows; the run's end, for the
 * last batch). Only the entries before the first one `apart` refuses are split off (a flood of deltas or telemetry),
 * so no entry is written without the other rows that go with it; the rest, from there on, is one write whatever its
 * size, as every batch was before parts.
 */
export function splitLedgerWrites<T>(entries: T[], apart: (entry: T) => boolean, joined: (entry: T, next: T) => boolean = () => false): { leading: T[][]; rest: T[] } {
  const firstWithOthers = entries.findIndex((e) => !apart(e));
  const splittable = firstWithOthers < 0 ? entries.length : firstWithOthers;
  const leading: T[][] = [];
  let start = 0;
  while (entries.length - start > LEDGER_ROWS_PER_WRITE && start + LEDGER_ROWS_PER_WRITE <= splittable) {
    // A part never ends between two entries `joined` keeps together (a dropped result and the warning naming it).
    const end = start + LEDGER_ROWS_PER_WRITE - (joined(entries[start + LEDGER_ROWS_PER_WRITE - 1], entries[start + LEDGER_ROWS_PER_WRITE]) ? 1 : 0);
    leading.push(entries.slice(start, end));
    start = end;
  }
  return { leading, rest: entries.slice(start) };
}

/** The result a host warning names (`ledger_seq`: one the host dropped or ignored), if it names one. */
function namedByWarning(entry: LedgerEntry): unknown {
  if (entry.origin !== "host" || entry.type !== "host.warning") return undefined;
  return (entry.data as { ledger_seq?: unknown } | null)?.ledger_seq ?? undefined;
}

/**
 * A dropped result and the warning after it naming it (`ledger_seq`): the ledger's only mark of the drop (markDropped),
 * so a reply rebuilt from it never shows the result, whichever write of the batch fails.
 */
export function droppedWithWarning(entry: LedgerEntry, next: LedgerEntry): boolean {
  return entry.origin === "runner" && entry.dropped === true && namedByWarning(next) === entry.seq;
}

/**
 * writableApart for the entries of one batch, but for a dropped result whose warning does not follow it at once: a
 * refused reference's is made once the whole batch was processed (batchStatements), so it comes after every other
 * entry; a part written apart would leave the result in the ledger unmarked if the rest were refused for good. From
 * it on, as from a reference accepted, nothing more of the batch is written apart.
 */
export function apartInBatch(entries: LedgerEntry[]): (entry: LedgerEntry) => boolean {
  const warnedLater = new Set<unknown>();
  entries.forEach((entry, i) => {
    const named = namedByWarning(entry);
    if (named !== undefined && entries[i - 1]?.seq !== named) warnedLater.add(named);
  });
  return (entry) => writableApart(entry) && !warnedLater.has(entry.seq);
}

/**
 * Of a batch's drop audits, those of results among `entries` (named by `ledger_seq`): written in the same write as the
 * result and its warning, so the ledger holds no drop whose audit was lost with a later write (a host-ended run's
 * count of unaudited drops is the drops its ledger holds less the audits EventLog holds: drop-records.ts).
 */
export function auditsOf(audits: HostRecord[], entries: LedgerEntry[]): HostRecord[] {
  const seqs = new Set<unknown>(entries.map((e) => e.seq));
  return audits.filter((a) => seqs.has(a.data.ledger_seq));
}
