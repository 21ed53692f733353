import { writeAll, type Db } from "../db/client";
import type { LedgerPort } from "../host-api/actions/context";
import { runsStore, type LedgerEntry } from "../stores/runs";
import type { LedgerSequence } from "./ledger-sequence";

/**
 * The run ledger as the Host API writes it (tool calls, model usage): host
 * records numbered from the run's shared sequence, written, then shown to
 * live subscribers like any result. Once the run is ending nothing more is
 * recorded: its end is the ledger's last entry.
 */
export function hostLedger(db: Db, runId: string, sequence: LedgerSequence, publish: (entries: LedgerEntry[]) => void): LedgerPort {
  return {
    async append(entries) {
      if (!entries.length) return;
      const written = sequence.hostRecord(entries.length, async (seqs) => {
        const rows: LedgerEntry[] = entries.map((e, i) => ({ runId, seq: seqs[i], type: e.type, data: e.data, origin: "host", createdAt: Date.now() }));
        await writeAll(db, runsStore(db).ledgerInserts(rows));
        publish(rows);
      });
      if (!written) console.warn(`run ${runId}: ${entries.map((e) => e.type).join(", ")} not recorded: the run has ended`);
      await written;
    },
  };
}
