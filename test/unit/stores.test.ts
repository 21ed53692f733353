import { createClient } from "@libsql/client";
import { drizzle } from "drizzle-orm/libsql";
import { migrate } from "drizzle-orm/libsql/migrator";
import { beforeEach, describe, expect, it } from "vitest";
import { eq, sql } from "drizzle-orm";
import { createDb, writeAll, type Db } from "../../src/db/client";
import { compiled, param } from "../../src/db/compiled";
import { agent, runnerState } from "../../src/db/schema";
import { libsqlExecutor, type SqlQuery } from "../../src/db/executor";
import { describeError } from "../../src/lib/describe-error";
import { agentsStore, BindingConflictError } from "../../src/stores/agents";
import { artifactsStore } from "../../src/stores/artifacts";
import { runsStore } from "../../src/stores/runs";
import { stateScopeKey, stateStore } from "../../src/stores/state";
import { storageStore } from "../../src/stores/storage";
import { createHash } from "node:crypto";
import { transcriptInsert, transcriptStore } from "../../src/stores/transcript";

const OWNER = { runnerId: "r", agentId: "a", agentEpoch: null };
/** A scope cap these tests never reach. */
const ROOMY = { maxKeys: 1000, maxBytes: 1 << 20 };
/** The runners' service (service_id 'svc'): an agent is written only while its service is where its secrets were sealed for. */
const SERVICE_URL = "http://svc.test";
/** State is written only for an agent that exists (migration 0012): OWNER's runner and agent. */
async function registerOwner() {
  await db.run(sql`INSERT INTO runner (runner_id, service_id, name, manifest_json, updated_at) VALUES ('r', 'svc', 'r', '{}', 1)`);
  await agentsStore(db).create({ ...agentRow("a", "bot-owner", []), runnerId: "r" }, SERVICE_URL);
}

let db: Db;
let client: ReturnType<typeof createClient>;
beforeEach(async () => {
  client = createClient({ url: ":memory:" });
  await migrate(drizzle(client), { migrationsFolder: "migrations" });
  db = createDb(libsqlExecutor(client));
  await db.run(sql`INSERT INTO runner_service (service_id, base_url, created_at) VALUES ('svc', ${SERVICE_URL}, 1)`);
});

const agentRow = (agentId: string, scopeId: string, eventTypes: string[], enabled = true) => ({
  agentId,
  name: agentId,
  runnerId: "http:a/b/c",
  eventTypesJson: JSON.stringify(eventTypes),
  scopeType: "bot",
  scopeId,
  enabled,
  createdAt: 1,
  updatedAt: 1,
});

describe("stores on embedded libSQL", () => {
  it("refuses an agent on an unregistered runner, removing a runner in use and a binding with no agent (migration 0008)", async () => {
    // Drizzle wraps a raw statement's failure ("Failed query"), with the database's refusal as its cause.
    const refusal = (p: Promise<unknown>) => p.then(() => null, (e: Error) => /integrity: ([a-z_]+)/.exec(`${e.message} ${String((e.cause as Error | undefined)?.message)}`)?.[1] ?? e.message);
    expect(await refusal(db.insert(agent).values(agentRow("lost", "bot-x", ["message.received"])).run())).toBe("agent_runner_not_registered");
    await db.run(sql`INSERT INTO runner (runner_id, service_id, name, manifest_json, updated_at) VALUES ('http:a/b/c', 'svc', 'c', '{}', 1)`);
    expect(await agentsStore(db).create(agentRow("kept", "bot-x", ["message.received"]), SERVICE_URL)).toBe(true);
    expect(await refusal(db.run(sql`DELETE FROM runner WHERE runner_id = 'http:a/b/c'`))).toBe("runner_in_use");
    expect(await refusal(db.run(sql`INSERT INTO agent_binding (scope_type, scope_id, event_type, agent_id) VALUES ('bot', 'bot-y', 'message.received', 'nobody')`))).toBe("binding_agent_missing");
    await agentsStore(db).remove("kept", null);
    expect(await refusal(db.run(sql`DELETE FROM runner WHERE runner_id = 'http:a/b/c'`))).toBeNull();
  });

  it("numbers transcript items per conversation and pages both directions", async () => {
    const item = (n: number, key: string) => transcriptInsert(db, { transcriptId: `t${key}${n}`, conversationKey: key, eventId: `e${n}`, role: "user", itemType: "message", content: `m${n}` });
    await db.batch([item(1, "A"), item(2, "A"), item(1, "B"), item(3, "A")]);
    const t = transcriptStore(db);
    const back = await t.page("A", { direction: "backward", limit: 2 });
    expect(back.rows.map((r) => [r.seq, r.content])).toEqual([[3, "m3"], [2, "m2"]]);
    expect(back.hasMore).toBe(true);
    const fwd = await t.page("A", { direction: "forward", afterSeq: 1, limit: 10 });
    expect(fwd.rows.map((r) => r.seq)).toEqual([2, 3]);
    expect((await t.page("B", { direction: "backward", limit: 10 })).rows.map((r) => r.seq)).toEqual([1]);
  });

  it("skips an insert guarded on an ingress attempt that did not write the event", async () => {
    await db.batch([transcriptInsert(db, { transcriptId: "g1", conversationKey: "G", eventId: "e", role: "user", itemType: "message" }, "another-attempt")]);
    expect((await transcriptStore(db).page("G", { direction: "backward", limit: 5 })).rows).toHaveLength(0);
  });

  it("refuses overlapping enabled bindings atomically and names the holder", async () => {
    // An agent needs its runner registered (migration 0008).
    await db.run(sql`INSERT INTO runner (runner_id, service_id, name, manifest_json, updated_at) VALUES ('http:a/b/c', 'svc', 'c', '{}', 1)`);
    const agents = agentsStore(db);
    await agents.create(agentRow("one", "bot-1", ["message.received", "message.recalled"]), SERVICE_URL);
    const err = await agents.create(agentRow("two", "bot-1", ["message.recalled"]), SERVICE_URL).catch((e) => e);
    expect(err).toBeInstanceOf(BindingConflictError);
    expect(err.conflicts).toEqual([{ agentId: "one", eventType: "message.recalled" }]);
    // Nothing of the refused agent was written.
    expect(await agents.get("two")).toBeUndefined();
    await agents.create(agentRow("three", "bot-1", ["message.recalled"], false), SERVICE_URL);
    expect(await agents.get("three")).toBeDefined();
  });

  it("lists state keys by prefix with has_more, and upserts", async () => {
    await registerOwner();
    const s = stateStore(db);
    await db.batch([s.setStatement("k", "a.1", OWNER, "conversation", "1", ROOMY), s.setStatement("k", "a.2", OWNER, "conversation", "2", ROOMY), s.setStatement("k", "b.1", OWNER, "conversation", "3", ROOMY), s.setStatement("k", "a.1", OWNER, "conversation", "10", ROOMY)]);
    expect(await s.get("k", "a.1")).toBe(10);
    expect(await s.list("k", { prefix: "a.", limit: 1 })).toEqual({ keys: ["a.1"], hasMore: true });
    expect(await s.list("k", { prefix: "a.", afterKey: "a.1", limit: 5 })).toEqual({ keys: ["a.2"], hasMore: false });
  });

  it("sends a capped write's value to the database once (its guard sizes it there), and counts it as written", async () => {
    await registerOwner();
    const sent: SqlQuery[] = [];
    const inner = libsqlExecutor(client);
    const watched = createDb({ query: (q) => (sent.push(q), inner.query(q)), batch: (qs) => (sent.push(...qs), inner.batch(qs)) });
    // Non-ASCII, so a value counted in characters would show: 2 + 2 * 1000 bytes serialised.
    const stateValue = JSON.stringify("é".repeat(1000));
    const storageValue = Buffer.alloc(3000, 7).toString("base64");
    await stateStore(watched).setStatement("k", "a", OWNER, "conversation", stateValue, ROOMY).execute();
    await storageStore(watched).setStatement({ area: "plugin", ownerKey: "svc" }, "a", storageValue, ROOMY).execute();
    const copies = (value: string) => sent.flatMap((q) => q.params).filter((p) => p === value).length;
    expect([copies(stateValue), copies(storageValue)]).toEqual([1, 1]);
    expect(await db.all(sql`SELECT keys, bytes FROM runner_state_usage WHERE scope_key = 'k'`)).toEqual([[1, 2002]]);
    expect(await db.all(sql`SELECT keys, bytes FROM storage_usage WHERE owner_key = 'svc'`)).toEqual([[1, 3000]]);
    expect(await stateStore(db).get("k", "a")).toBe("é".repeat(1000));
    expect(await storageStore(db).get({ area: "plugin", ownerKey: "svc" }, "a")).toBe(storageValue);
  });

  it("compiled statements bind fresh values on every use, alone or in a batch, and refuse a missing value", async () => {
    await registerOwner();
    const s = stateStore(db);
    await s.setStatement("k", "a", OWNER, "conversation", '"one"', ROOMY).execute();
    await db.batch([s.setStatement("k", "b", OWNER, "conversation", '"two"', ROOMY), s.seedStatement("k", "a", OWNER, "conversation", '"ignored"')]);
    const [rowsK, rowsOther] = await db.batch([s.scopeSnapshotQuery("k"), s.scopeSnapshotQuery("other")]);
    expect(s.snapshotOf(rowsK)).toEqual({ values: { a: "one", b: "two" }, complete: true });
    expect(rowsOther).toEqual([]);
    // One key allowed: the next is read without its value, telling that the scope has more.
    expect(await s.scopeSnapshotQuery("k", 1).execute()).toEqual([{ key: "a", valueJson: '"one"' }, { key: "b", valueJson: null }]);
    const getState = compiled((d) => d.select().from(runnerState).where(eq(runnerState.key, param("key"))));
    await expect(getState(db, {}).execute()).rejects.toThrow(/placeholder "key"/);
  });

  it("cuts a scope's snapshot at its byte budget in key order, counting bytes, not characters", async () => {
    await registerOwner();
    const s = stateStore(db);
    // Two bytes per "é" in UTF-8: each value is 2 + 2 * n bytes serialised (a and b 22, c 4).
    const value = (n: number) => JSON.stringify("é".repeat(n));
    await db.batch([s.setStatement("k", "a", OWNER, "conversation", value(10), ROOMY), s.setStatement("k", "b", OWNER, "conversation", value(10), ROOMY), s.setStatement("k", "c", OWNER, "conversation", value(1), ROOMY)]);
    const snapshot = async (maxBytes: number) => s.snapshotOf(await s.scopeSnapshotQuery("k", 100, maxBytes).execute());
    expect(await snapshot(44)).toEqual({ values: { a: "é".repeat(10), b: "é".repeat(10) }, complete: false });
    expect(await snapshot(43)).toEqual({ values: { a: "é".repeat(10) }, complete: false });
    // A cut is a prefix: c would fit after a, but b comes first.
    expect(await snapshot(30)).toEqual({ values: { a: "é".repeat(10) }, complete: false });
    expect(await snapshot(48)).toEqual({ values: { a: "é".repeat(10), b: "é".repeat(10), c: "é" }, complete: true });
    expect(await snapshot(10)).toEqual({ values: {}, complete: false });
  });

  it("describes a failed query without its bound values, also once it crossed an RPC as a plain Error", async () => {
    await registerOwner();
    const secret = "sk-bound-value-0123456789";
    const s = stateStore(db);
    await s.setStatement("k", "a", OWNER, "conversation", "1", ROOMY).execute();
    // A second row under the same key through a plain insert: the primary key refuses it.
    const err = await db.insert(runnerState).values({ scopeKey: "k", key: "a", runnerId: "r", scope: "conversation", valueJson: JSON.stringify(secret), updatedAt: 0 }).run().catch((e: unknown) => e);
    expect(String((err as Error).message)).toContain(secret);
    for (const e of [err, new Error((err as Error).message)]) {
      const text = describeError(e);
      expect(text).toMatch(/runner_state/);
      expect(text).not.toContain(secret);
    }
  });

  it("names a refused batch's SQLite code once in its message, as a single query's, for the log lines that show it", async () => {
    const refused = (write: Promise<unknown>) => write.then(() => "applied", (e: unknown) => describeError(e));
    const single = await refused(db.run(sql`INSERT INTO no_such_table VALUES (1)`));
    const batched = await refused(writeAll(db, [db.run(sql`SELECT 1`), db.run(sql`INSERT INTO no_such_table VALUES (1)`)]));
    expect(single).toMatch(/SQLITE_ERROR: no such table: no_such_table/);
    expect(batched).toBe("SQLITE_ERROR: no such table: no_such_table");
  });

  it("runs a compiled query alone as a single query, not as a write batch", async () => {
    const client = createClient({ url: ":memory:" });
    await migrate(drizzle(client), { migrationsFolder: "migrations" });
    const inner = libsqlExecutor(client);
    const calls: string[] = [];
    const counted = createDb({ query: (q) => (calls.push("query"), inner.query(q)), batch: (qs) => (calls.push("batch"), inner.batch(qs)) });
    expect(await runsStore(counted).get("no-such-run")).toBeUndefined();
    expect(calls).toEqual(["query"]);
  });

  it("writes a run's ledger of any length in seq order, sixteen rows per statement", async () => {
    const entries = Array.from({ length: 40 }, (_, i) => ({ runId: "r1", seq: i + 1, type: "message.delta", data: { i }, origin: "runner" as const, createdAt: i }));
    const statements = runsStore(db).ledgerInserts(entries);
    expect(statements).toHaveLength(3);
    await writeAll(db, statements);
    const page = await runsStore(db).ledger("r1", 0, 100);
    expect(page.rows.map((r) => [r.seq, JSON.parse(r.dataJson).i])).toEqual(entries.map((e) => [e.seq, e.data.i]));
    expect(runsStore(db).ledgerInserts([])).toEqual([]);
  });

  it("pages a run's ledger by bytes as well as by count: every entry once, the first of a page always", async () => {
    // Data of 100 bytes each ({"t":"x…x"}), one of 1000.
    const data = (i: number) => ({ t: "x".repeat((i === 5 ? 1000 : 100) - 8) });
    const entries = Array.from({ length: 12 }, (_, i) => ({ runId: "r2", seq: i + 1, type: "message.delta", data: data(i + 1), origin: "runner" as const, createdAt: i }));
    await writeAll(db, runsStore(db).ledgerInserts(entries));
    const pages: number[][] = [];
    for (let after = 0, more = true; more; ) {
      const page = await runsStore(db).ledger("r2", after, 4, 300);
      pages.push(page.rows.map((r) => r.seq));
      expect(page.rows.every((r) => JSON.stringify(data(r.seq)) === r.dataJson)).toBe(true);
      more = page.hasMore;
      after = page.rows.at(-1)?.seq ?? after;
    }
    // Three of 100 fit in 300; the 1000-byte entry comes alone, as the first of its page; the count limit still applies.
    expect(pages).toEqual([[1, 2, 3], [4], [5], [6, 7, 8], [9, 10, 11], [12]]);
    expect((await runsStore(db).ledger("r2", 0, 2)).rows.map((r) => r.seq)).toEqual([1, 2]);
  });

  it("looks up more artifact ids than SQLite binds in one statement (a runner's burst of references chooses how many)", async () => {
    const row = (id: string) => ({ artifactId: id, artifactType: "file", source: "runner", conversationKey: "k", r2Key: `artifacts/${id}`, metadataJson: "{}", createdAt: 1 });
    await writeAll(db, [artifactsStore(db).insertStatement(row("art_first")), artifactsStore(db).insertStatement(row("art_last"))]);
    const ids = ["art_first", ...Array.from({ length: 40_000 }, (_, i) => `art_unknown_${i}`), "art_last"];
    expect((await artifactsStore(db).getMany(ids)).map((r) => r.artifactId).sort()).toEqual(["art_first", "art_last"]);
  });
});

describe("stateScopeKey", () => {
  it("keys an agent without a state epoch as before epochs existed, and each epoch of an agent apart", async () => {
    const id = { runnerId: "r", agentId: "a", workspaceId: "w", conversationId: "c" };
    const before = createHash("sha256").update(JSON.stringify(["r", "a", "w", "conversation", null, "c", null])).digest("hex");
    expect(await stateScopeKey("conversation", id)).toBe(before);
    expect(await stateScopeKey("conversation", { ...id, stateEpoch: null })).toBe(before);
    const first = await stateScopeKey("conversation", { ...id, stateEpoch: "epoch_1" });
    const second = await stateScopeKey("conversation", { ...id, stateEpoch: "epoch_2" });
    expect(new Set([before, first, second]).size).toBe(3);
  });
});

describe("endRunAsHost", () => {
  it("ends a run and records run.failed in one batch, once: a run already ended is left as it is", async () => {
    const { endRunAsHost } = await import("../../src/run/host-end");
    const { run } = await import("../../src/db/schema");
    await db.insert(run).values({ runId: "r1", eventId: "e1", conversationKey: "k", agentId: "a", runnerId: "http:a/b/c", status: "running", createdAt: 1 });
    const target = { runId: "r1", conversationKey: "k", conversation: { conversation_id: "c" }, runner: { runnerId: "http:a/b/c" } };
    const lost = { status: "failed" as const, errorCode: "host.session_lost", errorMessage: "lost" };
    // What an earlier instance recorded stays first in the ledger.
    await runsStore(db).ledgerInserts([{ runId: "r1", seq: 1, type: "message.delta", data: {}, origin: "runner", createdAt: 1 }])[0].execute();
    expect(await endRunAsHost(db, target, lost)).toMatchObject({ runId: "r1", seq: 2, type: "run.failed", origin: "host", data: { code: "host.session_lost" } });
    expect(await endRunAsHost(db, target, { ...lost, errorCode: "host.internal_error" })).toBeNull();
    expect((await runsStore(db).ledger("r1", 0, 10)).rows.map((e) => [e.seq, e.type])).toEqual([
      [1, "message.delta"],
      [2, "run.failed"],
    ]);
    expect((await runsStore(db).get("r1"))).toMatchObject({ status: "failed", errorCode: "host.session_lost" });
    const records = await db.all<{ data_json: string }>(sql`SELECT data_json FROM event_log WHERE run_id = 'r1' AND event_type = 'run.failed'`);
    expect(records.map((r) => JSON.parse(Object.values(r)[0] as string).code)).toEqual(["host.session_lost"]);
  });
});
