import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { putAgent, startScriptedRunner } from "../support/scripted-runner";

/**
 * A write refused because its state scope or storage area is full still counts against its run's budget
 * (RUN_MAX_STATE_UPDATES, RUN_MAX_STORAGE_WRITES): the database did a write's work, and a runner looping on a full
 * scope (its 413 says not retryable) is stopped by the budget, as a flood is, not left to load the database until its
 * deadline.
 */
const CAP = 2;
const BUDGET = 2;
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;

beforeAll(async () => {
  runner = await startScriptedRunner({
    name: "cap-budget",
    runners: [{ name: "default", label: { en_US: "cap-budget" }, capabilities: {}, permissions: { storage: ["workspace"] } }],
  });
  host = await startTestHost({
    vars: {
      STATE_MAX_SCOPE_KEYS: String(CAP),
      STORAGE_MAX_AREA_KEYS: String(CAP),
      RUN_MAX_STATE_UPDATES: String(BUDGET),
      RUN_MAX_STORAGE_WRITES: String(BUDGET),
      // Each chunk of results is written (and its state writes checked) as soon as it is read.
      RUN_WRITE_INTERVAL_MS: "0",
    },
  });
  await runner.register(host);
  await putAgent(host, { agent_id: "cap-budget", runner_id: runner.runnerId(), scope: { type: "bot", id: "bot-cb" }, resource_policy: { allow: { storage: ["workspace"] } } });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

/** An event of bot-cb from `actor` in `workspace`: each test has a scope and an area of its own. */
const by = (actor: string) => ({ bot_id: "bot-cb", workspace_id: `ws-${actor}`, actor: { actor_type: "user", actor_id: actor } });

/** Until `probe` answers true, within 10 s. */
async function until(what: string, probe: () => Promise<boolean>) {
  for (const end = Date.now() + 10_000; !(await probe()); ) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("a write refused for a full scope or area", () => {
  it("state.set: counts against RUN_MAX_STATE_UPDATES, so a loop on a full scope meets the budget's 429", async () => {
    await runner.run(host, "set-fill", async (api) => {
      for (let i = 1; i <= CAP; i++) await api("state.set", { scope: "actor", key: `k${i}`, value: i });
    }, by("u-set"));
    const { result } = await runner.run(host, "set-refused", async (api) => {
      const set = async (key: string) => (await api("state.set", { scope: "actor", key, value: "v" })).status;
      return [await set("new1"), await set("new2"), await set("new3"), await set("k1"), await set("k2"), await set("k1")];
    }, by("u-set"));
    // Two refused for the scope's cap (the budget), then the budget's 429, overwrites included.
    expect(result).toEqual([413, 413, 429, 429, 429, 429]);
  });

  it("storage.set: counts against RUN_MAX_STORAGE_WRITES, so a loop on a full area meets the budget's 429", async () => {
    const value_base64 = Buffer.from("abc").toString("base64");
    await runner.run(host, "storage-fill", async (api) => {
      for (let i = 1; i <= CAP; i++) await api("storage.set", { area: "workspace", key: `k${i}`, value_base64 });
    }, by("u-storage"));
    const { result } = await runner.run(host, "storage-refused", async (api) => {
      const set = async (key: string) => (await api("storage.set", { area: "workspace", key, value_base64 })).status;
      return [await set("new1"), await set("new2"), await set("new3"), await set("k1"), await set("k2"), await set("k1")];
    }, by("u-storage"));
    expect(result).toEqual([413, 413, 429, 429, 429, 429]);
  });

  it("state.updated: a result dropped for the scope's cap counts against RUN_MAX_STATE_UPDATES, so a runner flooding a full scope fails its run", async () => {
    await runner.run(host, "updated-fill", async (api) => {
      for (let i = 1; i <= CAP; i++) await api("state.set", { scope: "actor", key: `k${i}`, value: i });
    }, by("u-updated"));
    let runId = "";
    const flood = runner.run(host, "updated-refused", async (_api, ctx, emit) => {
      runId = ctx.run_id;
      const refusedSoFar = async () =>
        (await host.query<{ data_json: string }>("SELECT data_json FROM run_event WHERE run_id = ? AND type = 'host.warning'", [ctx.run_id])).filter((r) => JSON.parse(r.data_json).code === "result.state_scope_full").length;
      // As many as the budget, each checked before the next is sent, then one more.
      for (let i = 1; i <= BUDGET; i++) {
        emit("state.updated", { scope: "actor", key: `new${i}`, value: i });
        await until(`the drop of new${i}`, async () => (await refusedSoFar()) === i);
      }
      emit("state.updated", { scope: "actor", key: "k1", value: "rewritten" });
    }, by("u-updated"));
    await expect(flood).rejects.toThrow(/script run ended failed: .*runner\.too_many_state_updates/);
    const { result } = await runner.run(host, "updated-read", async (api) => (await api("state.get", { scope: "actor", key: "k1" })).body.data, by("u-updated"));
    expect(result).toEqual({ value: 1, found: true });
    expect(runId).not.toBe("");
  });
});
