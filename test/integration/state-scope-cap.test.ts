import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { deferred } from "../support/host-api";
import { putAgent, startScriptedRunner } from "../support/scripted-runner";

/**
 * What one state scope keeps across runs is bounded (STATE_MAX_SCOPE_KEYS, STATE_MAX_SCOPE_BYTES): a write past the
 * cap writes nothing and says so (a state.set 413, a state.updated dropped with a warning), an overwrite no larger and
 * a delete always go through, the database decides each write alone however many conversations race for the last
 * room, and the usage it checks against stays exact through overwrites, deletes and retention's sweep.
 */
const MAX_KEYS = 4;
// The least a scope may be capped at: one value of the largest size (256 KiB) and some.
const MAX_BYTES = 300_000;
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;

beforeAll(async () => {
  runner = await startScriptedRunner({ name: "state-capped" });
  host = await startTestHost({ vars: { STATE_MAX_SCOPE_KEYS: String(MAX_KEYS), STATE_MAX_SCOPE_BYTES: String(MAX_BYTES), RETENTION_BATCH_SIZE: "3" } });
  await runner.register(host);
  await putAgent(host, { agent_id: "capped", runner_id: runner.runnerId(), scope: { type: "bot", id: "bot-cap" } });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

/** An event of bot-cap from `actor`: each test has an actor scope of its own. */
const by = (actor: string) => ({ bot_id: "bot-cap", actor: { actor_type: "user", actor_id: actor } });
/** A JSON string value of `n` bytes serialised (its quotes included). */
const ofBytes = (n: number) => "x".repeat(n - 2);

/** The usage rows are what runner_state holds, scope by scope: the triggers kept them exact. */
async function expectUsageExact() {
  const plain = (rows: Record<string, unknown>[]) => rows.map((r) => ({ scope_key: r.scope_key, keys: Number(r.keys), bytes: Number(r.bytes) }));
  const counted = await host.query("SELECT scope_key, COUNT(*) AS keys, SUM(length(CAST(value_json AS BLOB))) AS bytes FROM runner_state GROUP BY scope_key ORDER BY scope_key");
  const kept = await host.query("SELECT scope_key, keys, bytes FROM runner_state_usage ORDER BY scope_key");
  expect(plain(kept)).toEqual(plain(counted));
}

describe("a state scope's cap", () => {
  it("refuses a new key past STATE_MAX_SCOPE_KEYS (413, not retryable, naming the cap and the usage), writes nothing, and lets keys be overwritten, deleted, and the room a delete makes be used", async () => {
    const { result } = await runner.run(host, "cap-keys", async (api) => {
      const filled = [];
      for (let i = 1; i <= MAX_KEYS; i++) filled.push((await api("state.set", { scope: "actor", key: `k${i}`, value: ofBytes(10) })).status);
      const over = await api("state.set", { scope: "actor", key: "k-over", value: ofBytes(10) });
      return {
        filled,
        over,
        overWritten: (await api("state.get", { scope: "actor", key: "k-over" })).body.data,
        overwrite: (await api("state.set", { scope: "actor", key: "k1", value: ofBytes(10) })).status,
        shrink: (await api("state.set", { scope: "actor", key: "k2", value: 1 })).status,
        deleted: (await api("state.delete", { scope: "actor", key: "k3" })).status,
        again: (await api("state.set", { scope: "actor", key: "k-over", value: ofBytes(10) })).status,
        keys: (await api("state.list", { scope: "actor" })).body.data.keys,
        full: (await api("state.set", { scope: "actor", key: "k-more", value: 1 })).status,
      };
    }, by("u-keys"));
    expect(result.filled).toEqual(Array(MAX_KEYS).fill(200));
    expect(result.over.status).toBe(413);
    expect(result.over.body).toEqual({
      ok: false,
      error: {
        code: "payload_too_large",
        message: expect.stringMatching(/^state scope actor holds 4 keys, and at most 4 are allowed \(STATE_MAX_SCOPE_KEYS\); nothing was written/),
        retryable: false,
        details: { scope: "actor", setting: "STATE_MAX_SCOPE_KEYS", limit: MAX_KEYS, keys: MAX_KEYS, bytes: 4 * 10, value_bytes: 10 },
      },
    });
    expect(result.overWritten).toEqual({ value: null, found: false });
    expect([result.overwrite, result.shrink, result.deleted, result.again]).toEqual([200, 200, 200, 200]);
    expect(result.keys).toEqual(["k-over", "k1", "k2", "k4"]);
    expect(result.full).toBe(413);
    await expectUsageExact();
  });

  it("refuses a value that would take the scope past STATE_MAX_SCOPE_BYTES, a new key or a larger overwrite, and always takes a value no larger", async () => {
    const { result } = await runner.run(host, "cap-bytes", async (api) => {
      const set = async (key: string, bytes: number) => (await api("state.set", { scope: "actor", key, value: ofBytes(bytes) })).body;
      return {
        big: await set("a", 200_000),
        tooMuch: await set("b", MAX_BYTES - 200_000 + 1),
        fits: await set("b", MAX_BYTES - 200_000),
        grown: await set("a", 200_001),
        same: await set("a", 200_000),
        shrunk: await set("a", 10),
        grownAgain: await set("b", 250_000),
      };
    }, by("u-bytes"));
    expect(result.big.ok).toBe(true);
    expect(result.tooMuch.error).toMatchObject({ code: "payload_too_large", retryable: false, details: { scope: "actor", setting: "STATE_MAX_SCOPE_BYTES", limit: MAX_BYTES, keys: 1, bytes: 200_000, value_bytes: 100_001 } });
    expect(result.fits.ok).toBe(true);
    expect(result.grown.error).toMatchObject({ details: { setting: "STATE_MAX_SCOPE_BYTES", keys: 2, bytes: MAX_BYTES, value_bytes: 200_001 } });
    expect(result.grown.error.message).toContain("in place of 200000 bytes");
    for (const k of ["same", "shrunk", "grownAgain"]) expect(result[k], k).toEqual({ ok: true, data: { ok: true } });
    await expectUsageExact();
  });

  it("drops a state.updated result past the cap with a result.state_scope_full warning and audit naming it, and the run goes on", async () => {
    const { runId } = await runner.run(host, "cap-results", async (api, _ctx, emit) => {
      for (let i = 1; i <= MAX_KEYS; i++) await api("state.set", { scope: "actor", key: `k${i}`, value: i });
      emit("state.updated", { scope: "actor", key: "k-over", value: "past the cap" });
      // Overwrites fit whatever the scope holds.
      emit("state.updated", { scope: "actor", key: "k1", value: "rewritten" });
    }, by("u-results"));
    const rows = await host.query<{ seq: number; type: string; origin: string; data_json: string }>("SELECT seq, type, origin, data_json FROM run_event WHERE run_id = ? ORDER BY seq", [runId]);
    const ledger = rows.map((r) => ({ seq: Number(r.seq), type: r.type, origin: r.origin, data: JSON.parse(r.data_json) }));
    const over = ledger.find((e) => e.type === "state.updated" && e.data.key === "k-over")!;
    const warnings = ledger.filter((e) => e.type === "host.warning" && e.data.ledger_seq === over.seq);
    expect(warnings).toEqual([
      expect.objectContaining({ origin: "host", data: expect.objectContaining({ code: "result.state_scope_full", message: expect.stringMatching(/^state\.updated dropped: state scope actor holds 4 keys/) }) }),
    ]);
    const audits = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE event_type = 'runner.result_dropped' AND run_id = ?", [runId]);
    expect(audits.map((a) => JSON.parse(a.data_json))).toEqual([
      expect.objectContaining({ result_type: "state.updated", ledger_seq: over.seq, scope: "actor", setting: "STATE_MAX_SCOPE_KEYS", limit: MAX_KEYS, keys: MAX_KEYS }),
    ]);
    const { result } = await runner.run(host, "cap-results", async (api) => ({
      over: (await api("state.get", { scope: "actor", key: "k-over" })).body.data,
      k1: (await api("state.get", { scope: "actor", key: "k1" })).body.data,
    }), by("u-results"));
    expect(result).toEqual({ over: { value: null, found: false }, k1: { value: "rewritten", found: true } });
    await expectUsageExact();
  });

  it("gives the last key to exactly one of the writes of two conversations' runs racing for it", async () => {
    await runner.run(host, "race-fill", async (api) => {
      for (let i = 1; i < MAX_KEYS; i++) await api("state.set", { scope: "actor", key: `k${i}`, value: i });
    }, by("u-race"));
    // Both runs are under way before either writes; then each sends three writes of new keys at once.
    const bothIn = deferred();
    let arrived = 0;
    const race = (conversation: string) =>
      runner.run(host, conversation, async (api) => {
        if (++arrived === 2) bothIn.resolve();
        await bothIn.promise;
        const answers = await Promise.all([1, 2, 3].map((i) => api("state.set", { scope: "actor", key: `${conversation}-${i}`, value: i })));
        return answers.map((a) => a.status);
      }, by("u-race"));
    const [a, b] = await Promise.all([race("race-a"), race("race-b")]);
    const statuses = [...a.result, ...b.result].sort();
    expect(statuses).toEqual([200, 413, 413, 413, 413, 413]);
    const { result } = await runner.run(host, "race-fill", async (api) => (await api("state.list", { scope: "actor" })).body.data.keys, by("u-race"));
    expect(result).toHaveLength(MAX_KEYS);
    await expectUsageExact();
  });

  it("gives the last key to one of two conversations' state.updated results that both passed their batches' read: the other is not written (and gets no warning)", async () => {
    await runner.run(host, "race-upd-fill", async (api) => {
      for (let i = 1; i < MAX_KEYS; i++) await api("state.set", { scope: "actor", key: `k${i}`, value: i });
    }, by("u-race-upd"));
    // Both batches' writes (a capped write's statement names its value `new_value`) are held until both have read the
    // scope's room: each read finds the last key free, and only the guard in the write tells them apart.
    host.databaseOutage({ delayMs: 600, matching: "new_value", queries: 2 });
    const bothIn = deferred();
    let arrived = 0;
    const race = (conversation: string) =>
      runner.run(host, conversation, async (_api, _ctx, emit) => {
        if (++arrived === 2) bothIn.resolve();
        await bothIn.promise;
        emit("state.updated", { scope: "actor", key: conversation, value: 1 });
      }, by("u-race-upd"));
    const runs = await Promise.all([race("race-upd-a"), race("race-upd-b")]);
    const { result: keys } = await runner.run(host, "race-upd-fill", async (api) => (await api("state.list", { scope: "actor" })).body.data.keys, by("u-race-upd"));
    expect(keys).toHaveLength(MAX_KEYS);
    expect(keys.filter((k: string) => k.startsWith("race-upd-"))).toHaveLength(1);
    const warned = await host.query(`SELECT 1 FROM run_event WHERE type = 'host.warning' AND run_id IN (?, ?)`, runs.map((r) => r.runId));
    expect(warned).toEqual([]);
    await expectUsageExact();
  });

  it("leaves no usage behind once retention has swept a deleted agent's state", async () => {
    await putAgent(host, { agent_id: "swept", runner_id: runner.runnerId(), scope: { type: "bot", id: "bot-swept" }, state_policy: { state_scopes: ["conversation", "actor", "runner"] } });
    await runner.run(host, "swept-conv", async (api, _ctx, emit) => {
      for (let i = 1; i <= 3; i++) await api("state.set", { scope: "actor", key: `k${i}`, value: i });
      await api("state.set", { scope: "runner", key: "session", value: "s" });
      emit("state.updated", { scope: "conversation", key: "notes", value: "n" });
    }, { bot_id: "bot-swept", actor: { actor_type: "user", actor_id: "u-swept" } });
    const scopes = (await host.query<{ scope_key: string }>("SELECT DISTINCT scope_key FROM runner_state WHERE agent_id = 'swept'")).map((r) => r.scope_key);
    expect(scopes).toHaveLength(3);
    const usageOf = async () => host.query(`SELECT scope_key FROM runner_state_usage WHERE scope_key IN (${scopes.map(() => "?").join(", ")})`, scopes);
    expect(await usageOf()).toHaveLength(3);
    expect((await host.admin("DELETE", "/v1/admin/agents/swept")).status).toBe(200);
    // Six rows (the seed among them), three per statement: an invocation sweeps them all.
    await host.triggerScheduled();
    expect(await host.query("SELECT key FROM runner_state WHERE agent_id = 'swept'")).toEqual([]);
    expect(await usageOf()).toEqual([]);
    await expectUsageExact();
  });
});
