import { batchAll, writeAll, type Db } from "../db/client";
import { mayHaveApplied } from "../db/executor";
import type { LedgerPort } from "../host-api/actions/context";
import { runsStore, type LedgerEntry } from "../stores/runs";
import type { LedgerSequence } from "./ledger-sequence";

/**
 * The run ledger as the Host API writes it (tool calls, model usage): host
 * records numbered from the run's shared sequence, written, then shown to
 * live subscribers like any result. Once the run is ending nothing more is
 * recorded: its end is the ledger's last entry (a write that lands after it,
 * held on the wire, writes nothing). A write that got no answer may have
 * been applied: the run's end tells followers of those the ledger holds.
 * Statements `alongside` (an EventLog record of the same fact) share the
 * entries' round trip, and are written all the same once the run is ending.
 */
export function hostLedger(db: Db, runId: string, sequence: LedgerSequence, publish: (entries: LedgerEntry[]) => void): LedgerPort {
  return {
    async append(entries, alongside = []) {
      if (!entries.length) return writeAll(db, alongside);
      const written = sequence.hostRecord(entries.length, async (seqs) => {
        const rows: LedgerEntry[] = entries.map((e, i) => ({ runId, seq: seqs[i], type: e.type, data: e.data, origin: "host", createdAt: Date.now() }));
        const results = await batchAll(db, [...runsStore(db).hostRecordInserts(rows), ...alongside]).catch((err: unknown) => {
          if (mayHaveApplied(err)) sequence.unansweredHostRecords.push(...rows);
          throw err;
        });
        // Only what was recorded: a run's followers are never shown an entry its ledger does not hold.
        publish(rows.filter((_, i) => (results[i] as unknown[]).length > 0));
      });
      if (written) return written;
      console.warn(`run ${runId}: ${entries.map((e) => e.type).join(", ")} not recorded in its ledger: the run has ended`);
      await writeAll(db, alongside);
    },
  };
}
