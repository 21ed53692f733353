import { afterEach, describe, expect, it } from "vitest";
import { openEmbeddedDb, type EmbeddedDb } from "../../local/libsql";
import { createDb, type Db } from "../../src/db/client";
import { deleteDeletedOwnersData } from "../../src/retention/deleted-owners";
import { agentsStore } from "../../src/stores/agents";
import { registryStore } from "../../src/stores/registry";

/**
 * README (Artifacts and retention): deleting an agent or a runner service answers without deleting what it wrote (its
 * state, its plugin storage area: any amount of it), and retention deletes that in bounded batches. Cost is counted
 * in SQLite virtual-machine steps (`sqlite_stmt`, as retention-dormant-cost.test.ts does), not timed.
 */
const opened: EmbeddedDb[] = [];
afterEach(() => {
  for (const e of opened.splice(0)) e.close();
});

const SERVICE_URL = "http://svc.test";
const LIMITS = { batchSize: 20, maxBatches: 1 };

async function open(): Promise<{ e: EmbeddedDb; db: Db; run: (sql: string, params?: unknown[]) => Promise<unknown> }> {
  const e = await openEmbeddedDb(":memory:");
  opened.push(e);
  const run = (sql: string, params: unknown[] = []) => e.executor.query({ sql, params, method: "run" });
  await run(`INSERT INTO runner_service (service_id, base_url, created_at) VALUES ('svc', ?, 1)`, [SERVICE_URL]);
  await run(`INSERT INTO runner (runner_id, service_id, name, manifest_json, updated_at) VALUES ('http:a/b/c', 'svc', 'c', '{}', 1)`);
  return { e, db: createDb(e.executor), run };
}

async function createAgent(db: Db, agentId: string, stateEpoch: string | null) {
  const row = { agentId, name: agentId, runnerId: "http:a/b/c", eventTypesJson: "[]", scopeType: "global", scopeId: "", enabled: true, stateEpoch, createdAt: 1, updatedAt: 1 };
  expect(await agentsStore(db).create(row, SERVICE_URL)).toBe(true);
}

/** `n` state rows of the agent as it is now (`epoch`; null: written without one, as before migration 0014). */
function writeState(run: (sql: string, params?: unknown[]) => Promise<unknown>, agentId: string, epoch: string | null, n: number, tag = epoch ?? "none") {
  return run(
    `WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < ${n})
     INSERT INTO runner_state (scope_key, key, runner_id, scope, value_json, updated_at, agent_id, agent_epoch) SELECT ? || '-' || ?, 'k' || i, 'http:a/b/c', 'actor', '1', 1, ?, ? FROM c`,
    [agentId, tag, agentId, epoch],
  );
}

const stateOf = (e: EmbeddedDb) =>
  e.rows<{ agent_id: string; agent_epoch: string | null; n: number }>("SELECT agent_id, agent_epoch, COUNT(*) AS n FROM runner_state GROUP BY agent_id, agent_epoch ORDER BY agent_id, agent_epoch");
const steps = (e: EmbeddedDb, table: string) =>
  Number(e.rows<{ n: number }>(`SELECT COALESCE(SUM(nstep), 0) AS n FROM sqlite_stmt WHERE sql LIKE '%${table}%' AND sql NOT LIKE '%sqlite_stmt%'`)[0].n);

describe("what deleted agents and runner services leave, deleted by retention", () => {
  it("deletes a deleted agent's state batchSize rows per statement, never that of an agent created again under its id", async () => {
    const { e, db, run } = await open();
    await createAgent(db, "x", "epoch-1");
    await writeState(run, "x", "epoch-1", 30);
    // Written without an epoch while the agent lived (between migrations 0009 and 0014): its too.
    await writeState(run, "x", null, 5);
    await createAgent(db, "other", "epoch-o");
    await writeState(run, "other", "epoch-o", 3);

    await agentsStore(db).remove("x", "epoch-1");
    // The DELETE leaves the rows (nobody reaches them: the next agent "x" has another epoch) and notes them.
    expect(e.rows("SELECT kind, owner_id, epoch FROM deleted_owner")).toEqual([{ kind: "agent_state", owner_id: "x", epoch: "epoch-1" }]);
    await createAgent(db, "x", "epoch-2");
    await writeState(run, "x", "epoch-2", 4);

    expect(await deleteDeletedOwnersData(db, LIMITS)).toBe(20);
    expect(await deleteDeletedOwnersData(db, { batchSize: 20, maxBatches: 5 })).toBe(15);
    expect(stateOf(e)).toEqual([
      { agent_id: "other", agent_epoch: "epoch-o", n: 3 },
      { agent_id: "x", agent_epoch: "epoch-2", n: 4 },
    ]);
    // Nothing left of it: its note is gone, and a later call does nothing.
    expect(e.rows("SELECT * FROM deleted_owner")).toEqual([]);
    expect(await deleteDeletedOwnersData(db, LIMITS)).toBe(0);
  });

  it("deletes the state of an agent created before state epochs (migration 0009), and a deleted service's plugin area only", async () => {
    const { e, db, run } = await open();
    await createAgent(db, "old", null);
    await writeState(run, "old", null, 3);
    await run(`INSERT INTO runner_service (service_id, base_url, created_at) VALUES ('svc-kept', 'http://kept.test', 1)`);
    for (const [area, owner] of [["plugin", "svc"], ["plugin", "svc"], ["plugin", "svc-kept"], ["workspace", "svc"]]) {
      await run(`INSERT INTO storage (area, owner_key, key, value_base64, updated_at) VALUES (?, ?, ?, 'AA==', 1)`, [area, owner, `k${Math.random()}`]);
    }
    await agentsStore(db).remove("old", null);
    await registryStore(db).removeService("svc");
    expect(await deleteDeletedOwnersData(db, { batchSize: 20, maxBatches: 5 })).toBe(5);
    expect(stateOf(e)).toEqual([]);
    // The workspace's area is the workspace's (whatever its id looks like), another service's its own.
    expect(e.rows("SELECT area, owner_key FROM storage ORDER BY area")).toEqual([
      { area: "plugin", owner_key: "svc-kept" },
      { area: "workspace", owner_key: "svc" },
    ]);
    expect(e.rows("SELECT * FROM deleted_owner")).toEqual([]);
  });

  it("takes many deleted owners in one statement: deleting agents in bulk is not cleared one agent per statement", async () => {
    const { e, db, run } = await open();
    for (let i = 0; i < 150; i++) {
      await createAgent(db, `bulk-${i}`, `epoch-${i}`);
      if (i % 50 === 0) await writeState(run, `bulk-${i}`, `epoch-${i}`, 2);
      await agentsStore(db).remove(`bulk-${i}`, `epoch-${i}`);
    }
    // One statement of 20 rows: the oldest 100 owners' rows (4 of them), and their notes.
    expect(await deleteDeletedOwnersData(db, LIMITS)).toBe(4);
    expect(e.rows<{ n: number }>("SELECT COUNT(*) AS n FROM deleted_owner")[0].n).toBe(50);
    expect(await deleteDeletedOwnersData(db, LIMITS)).toBe(2);
    expect(e.rows("SELECT * FROM deleted_owner")).toEqual([]);
    expect(stateOf(e)).toEqual([]);
  });

  it("a DELETE costs the same whatever the agent wrote, and a purge statement about its batch whatever the live agent of its id holds", async () => {
    const deleteCost = async (rows: number) => {
      const { e, db, run } = await open();
      await createAgent(db, "x", "epoch-1");
      await writeState(run, "x", "epoch-1", rows);
      const before = steps(e, "runner_state") + steps(e, "agent");
      await agentsStore(db).remove("x", "epoch-1");
      return steps(e, "runner_state") + steps(e, "agent") - before;
    };
    const small = await deleteCost(20);
    const large = await deleteCost(5_000);
    expect(large / small, `VM steps of the DELETE: ${small} for 20 state rows, ${large} for 5,000`).toBeLessThan(2);

    const purgeCost = async (live: number) => {
      const { e, db, run } = await open();
      await createAgent(db, "x", "epoch-1");
      await writeState(run, "x", "epoch-1", 10);
      await agentsStore(db).remove("x", "epoch-1");
      await createAgent(db, "x", "epoch-2");
      await writeState(run, "x", "epoch-2", live);
      const before = steps(e, "runner_state");
      // Its last rows: the statement also looks for rows left (of its epoch, or none), and finds the note done.
      expect(await deleteDeletedOwnersData(db, LIMITS)).toBe(10);
      expect(e.rows("SELECT * FROM deleted_owner")).toEqual([]);
      return steps(e, "runner_state") - before;
    };
    const few = await purgeCost(20);
    const many = await purgeCost(5_000);
    expect(many / few, `VM steps of a purge batch: ${few} beside 20 live rows, ${many} beside 5,000`).toBeLessThan(2);
  });
});
