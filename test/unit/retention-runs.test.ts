import { afterEach, describe, expect, it } from "vitest";
import { openEmbeddedDb, type EmbeddedDb } from "../../local/libsql";
import { createDb } from "../../src/db/client";
import type { SqlQuery } from "../../src/db/executor";
import { deleteOldRuns } from "../../src/retention/runs";

/**
 * Retention of ended runs with long ledgers (a row per result, every delta of
 * a streamed reply): no statement deletes more than RETENTION_BATCH_SIZE
 * rows, so none holds the write lock for long; a run goes only once its whole
 * ledger is gone, and no invocation ends with a run left without its ledger.
 */
let e: EmbeddedDb | undefined;
afterEach(() => e?.close());

const DAY_MS = 24 * 3600 * 1000;

async function seed(runs: number, ledger: number, status = "completed") {
  e = await openEmbeddedDb(":memory:");
  const old = Date.now() - 3 * DAY_MS;
  const run = (sql: string, params: unknown[] = []) => e!.executor.query({ sql, params, method: "run" });
  await run(
    `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${runs})
     INSERT INTO run (run_id, event_id, conversation_key, agent_id, runner_id, status, created_at) SELECT 'r' || i, 'e' || i, 'k', 'a', 'http:a/b/c', ?, ? + i FROM n`,
    [status, old],
  );
  await run(
    `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${ledger})
     INSERT INTO run_event (run_id, seq, type, data_json, origin, created_at) SELECT run.run_id, n.i, 'message.delta', '{}', 'runner', ? FROM run, n`,
    [old],
  );
  const statements: SqlQuery[] = [];
  const db = createDb({ query: (q) => (statements.push(q), e!.executor.query(q)), batch: (qs) => (statements.push(...qs), e!.executor.batch(qs)) });
  return { db, statements };
}
const count = (table: string) => e!.rows<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table}`)[0].n;

describe("deleteOldRuns", () => {
  it("deletes at most batchSize rows per statement, ledgers first, and a run only once its ledger is gone", async () => {
    const { db, statements } = await seed(20, 50);
    let before = count("run_event");
    // One round's worth: 30 ledger rows of the oldest runs, no run yet.
    expect(await deleteOldRuns(db, Date.now(), { batchSize: 30, maxBatches: 1 })).toBe(0);
    expect(before - count("run_event")).toBe(30);
    expect(count("run")).toBe(20);
    // No run is left without its ledger when an invocation ends.
    expect(e!.rows("SELECT run_id FROM run WHERE run_id NOT IN (SELECT run_id FROM run_event)")).toEqual([]);
    for (let i = 0; i < 100 && count("run") > 0; i++) {
      before = count("run_event");
      await deleteOldRuns(db, Date.now(), { batchSize: 30, maxBatches: 3 });
      expect(before - count("run_event")).toBeLessThanOrEqual(90);
      expect(e!.rows("SELECT run_id FROM run WHERE run_id NOT IN (SELECT run_id FROM run_event)")).toEqual([]);
    }
    expect([count("run"), count("run_event")]).toEqual([0, 0]);
    expect(statements.every((q) => q.sql.trimStart().toLowerCase().startsWith("delete"))).toBe(true);
  });

  it("deletes a run whose ledger a statement finished, even when that statement went on to the next run's", async () => {
    // Two statements of 30 rows over runs of 50: the second finishes r1's ledger and starts r2's.
    const { db } = await seed(3, 50);
    expect(await deleteOldRuns(db, Date.now(), { batchSize: 30, maxBatches: 2 })).toBe(1);
    expect(e!.rows("SELECT run_id FROM run WHERE run_id NOT IN (SELECT run_id FROM run_event)")).toEqual([]);
    expect(count("run")).toBe(2);
  });

  it("keeps runs that have not ended, and their ledgers, whatever their age", async () => {
    const { db } = await seed(5, 10, "running");
    expect(await deleteOldRuns(db, Date.now(), { batchSize: 100, maxBatches: 5 })).toBe(0);
    expect([count("run"), count("run_event")]).toEqual([5, 50]);
  });

  it("deletes short ledgers and their runs together in one round", async () => {
    const { db } = await seed(4, 2);
    expect(await deleteOldRuns(db, Date.now(), { batchSize: 100, maxBatches: 1 })).toBe(4);
    expect([count("run"), count("run_event")]).toEqual([0, 0]);
  });
});
