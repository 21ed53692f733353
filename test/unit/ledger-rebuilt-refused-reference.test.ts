import { createClient } from "@libsql/client";
import { drizzle } from "drizzle-orm/libsql";
import { migrate } from "drizzle-orm/libsql/migrator";
import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { createDb, writeAll } from "../../src/db/client";
import { libsqlExecutor } from "../../src/db/executor";
import { endRecordedMeanwhile } from "../../src/run/host-end";
import { runsStore, type LedgerEntry } from "../../src/stores/runs";

/**
 * Commit 10b0e90: a reply rebuilt from the stored ledger (restart, final write answered late) leaves out the results
 * the host dropped, as the live reply does; `endRecordedMeanwhile` marks them from the host.warning naming each by
 * `ledger_seq`, holding back one runner result that ends a page. But a refused artifact reference's warning is not
 * right after it: the executor refuses references after the whole batch was processed (batchStatements ->
 * refuseReference), so the warning comes after every other entry of the batch. When a ledger page (1000 rows) ends
 * between the refused artifact.created and its warning with another runner result last, the refused reference is
 * handed to the rebuilt reply unmarked: the reply announces (and tries to send) a file the live reply never showed.
 */
describe("endRecordedMeanwhile across a page boundary", () => {
  it("marks a refused artifact reference whose warning comes after the batch's other results on the next page", async () => {
    const client = createClient({ url: ":memory:" });
    await migrate(drizzle(client), { migrationsFolder: "migrations" });
    const db = createDb(libsqlExecutor(client));
    const runId = "run_page_edge";
    await db.run(sql`INSERT INTO run (run_id, event_id, conversation_key, agent_id, runner_id, status, created_at) VALUES (${runId}, 'ev', 'k', 'a', 'r', 'completed', 1)`);
    const e = (seq: number, type: string, origin: "runner" | "host", data: unknown): LedgerEntry => ({ runId, seq, type, data, origin, createdAt: 1, runnerSequence: null });
    const entries: LedgerEntry[] = [];
    for (let seq = 1; seq <= 998; seq++) entries.push(e(seq, "message.delta", "runner", { chunk: { role: "assistant", content: "x" } }));
    // One batch: a reference the executor refuses, then the message; the refusal's warning is appended after both.
    entries.push(e(999, "artifact.created", "runner", { artifact_type: "file", artifact_id: "art_other_conversation" }));
    entries.push(e(1000, "message.completed", "runner", { message: { role: "assistant", content: "done" } }));
    entries.push(e(1001, "host.warning", "host", { code: "result.invalid_payload", message: "artifact.created dropped", sequence: null, ledger_seq: 999 }));
    entries.push(e(1002, "run.completed", "runner", { finish_reason: "stop" }));
    await writeAll(db, runsStore(db).ledgerInserts(entries));

    const published: LedgerEntry[] = [];
    const status = await endRecordedMeanwhile(db, runId, 0, () => (batch) => published.push(...batch));
    expect(status).toBe("completed");
    expect(published.map((p) => p.seq)).toEqual(entries.map((x) => x.seq));
    expect(published.find((p) => p.seq === 999)?.dropped).toBe(true);
  });
});
