import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { putAgent, startScriptedRunner } from "../support/scripted-runner";

/**
 * A state.set or storage.set the database refused wrote nothing: it is answered retryable, and takes nothing from the
 * run's RUN_MAX_STATE_UPDATES or RUN_MAX_STORAGE_WRITES, so a runner retrying it as told still has its whole budget.
 */
const CAP = 2;
const b64 = (text: string) => Buffer.from(text).toString("base64");
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;

beforeAll(async () => {
  runner = await startScriptedRunner({ name: "budget-refused", runners: [{ name: "default", label: { en_US: "refused" }, capabilities: {}, permissions: { storage: ["plugin"] } }] });
  host = await startTestHost({ vars: { RUN_MAX_STATE_UPDATES: String(CAP), RUN_MAX_STORAGE_WRITES: String(CAP) } });
  await runner.register(host);
  await putAgent(host, { agent_id: "budget-refused", runner_id: runner.runnerId(), scope: { type: "conversation", id: "budget-refused" }, resource_policy: { allow: { storage: ["plugin"] } } });
});
afterAll(async () => {
  host?.databaseOutage(false);
  await host?.dispose();
  await runner?.close();
});

describe("a refused state.set or storage.set", () => {
  it("takes nothing from the run's budget: retried, it and the rest of the budget are written", async () => {
    const { result } = await runner.run(host, "budget-refused", async (api) => {
      host.databaseOutage({ queries: 1, matching: "refused-state-1" });
      const state = [];
      for (const key of ["refused-state-1", "refused-state-1", "refused-state-2"]) state.push((await api("state.set", { scope: "conversation", key, value: 1 })).status);
      host.databaseOutage({ queries: 1, matching: "refused-storage-1" });
      const storage = [];
      for (const key of ["refused-storage-1", "refused-storage-1", "refused-storage-2"]) storage.push((await api("storage.set", { area: "plugin", key, value_base64: b64("v") })).status);
      return { state, storage };
    });
    expect(result).toEqual({ state: [500, 200, 200], storage: [500, 200, 200] });
  });
});
