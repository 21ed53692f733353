import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { putAgent, startScriptedRunner } from "../support/scripted-runner";

/**
 * A run's storage.set calls are at most RUN_MAX_STORAGE_WRITES (README, Storage): each writes up to a MiB that outlives
 * the run, so the one past it writes nothing and is answered 429 rate_limited, not retryable. The budget is the run's:
 * the next run of the conversation has its own; storage.delete is not counted.
 */
const CAP = 3;
const b64 = (text: string) => Buffer.from(text).toString("base64");
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;

beforeAll(async () => {
  runner = await startScriptedRunner({ name: "storage-budget", runners: [{ name: "default", label: { en_US: "budget" }, capabilities: {}, permissions: { storage: ["plugin"] } }] });
  host = await startTestHost({ vars: { RUN_MAX_STORAGE_WRITES: String(CAP) } });
  await runner.register(host);
  await putAgent(host, { agent_id: "storage-budget", runner_id: runner.runnerId(), scope: { type: "conversation", id: "st-budget" }, resource_policy: { allow: { storage: ["plugin"] } } });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

const storedKeys = async (prefix: string) => (await host.query<{ key: string }>("SELECT key FROM storage WHERE key LIKE ? ORDER BY key", [`${prefix}%`])).map((r) => r.key);

describe("storage.set calls per run (RUN_MAX_STORAGE_WRITES)", () => {
  it("refuses the call past the cap (429, not retryable), writing nothing; a delete still goes through, and the next run has its own", async () => {
    const { result } = await runner.run(host, "st-budget", async (api) => {
      const sets = [];
      for (let i = 1; i <= CAP + 1; i++) sets.push(await api("storage.set", { area: "plugin", key: `one/k${i}`, value_base64: b64(`v${i}`) }));
      return { sets, deleted: await api("storage.delete", { area: "plugin", key: "one/k1" }) };
    });
    expect(result.sets.slice(0, CAP).map((a: { status: number }) => a.status)).toEqual([200, 200, 200]);
    expect(result.sets[CAP].status).toBe(429);
    expect(result.sets[CAP].body.error).toMatchObject({ code: "rate_limited", retryable: false, details: { limit: CAP } });
    expect(result.sets[CAP].body.error.message).toContain("RUN_MAX_STORAGE_WRITES");
    expect(result.deleted.status).toBe(200);
    expect(await storedKeys("one/")).toEqual(["one/k2", "one/k3"]);
    // The next run of the conversation has a budget of its own.
    const { result: next } = await runner.run(host, "st-budget", async (api) => {
      const statuses = [];
      for (let i = 1; i <= CAP; i++) statuses.push((await api("storage.set", { area: "plugin", key: `two/k${i}`, value_base64: b64("v") })).status);
      return statuses;
    });
    expect(next).toEqual([200, 200, 200]);
  });
});
