import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi, deferred } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
^ * README "State": "State belongs to the agent as created: deleting the agent deletes the state it wrote" (retention
 * deletes it, in bounded batches). An agent
 * deleted while one of its runs is in flight: what that run writes afterwards (a state.updated result, a state.set
 * call, the conversation seed) is state the deleted agent wrote: it is not written (migration 0012), where it
 * used to be left behind, readable by no agent and deleted by nothing.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const arrived = deferred<void>();
const release = deferred<void>();

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "stateful",
    runners: [{ name: "default", label: { en_US: "s" }, capabilities: { streaming: true } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      arrived.resolve();
      await release.promise;
      const set = await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "state.set", { scope: "conversation", key: "by.call", value: { n: 1 } });
      w.send("state.updated", { scope: "conversation", key: "by.result", value: { n: 2 } });
      w.reply(`set: ${set.status}`);
    },
  });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
});
afterAll(async () => {
  release.resolve();
  await host?.dispose();
  await runner?.close();
});

describe("an agent deleted while its run is in flight", () => {
  it("leaves no state rows of that agent behind once the run has ended", async () => {
    const c = "deleted-mid-run";
    expect(
      (await host.admin("POST", "/v1/admin/agents", { agent_id: "doomed", name: "doomed", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: c }, state_policy: { enable_state: true, state_scopes: ["conversation"] } }))
        .status,
    ).toBe(201);
    const posted = await host.postEvent(messageEvent(c, "hello"));
    await arrived.promise;
    const del = await host.admin("DELETE", "/v1/admin/agents/doomed?runs=leave");
    expect(del.status).toBeLessThan(300);
    // What it wrote before (its conversation seed) is the cron's to delete, in bounded batches.
    await host.triggerScheduled();
    expect(await host.query("SELECT key FROM runner_state WHERE agent_id = 'doomed'")).toEqual([]);
    release.resolve();
    const run = await host.waitForRun(posted.body.run_id!);
    const left = await host.query<{ key: string }>("SELECT key FROM runner_state WHERE agent_id = 'doomed' ORDER BY key");
    // Not written, and nothing else lost: the run's reply and ledger are recorded as usual.
    expect({ status: run.status, message: run.message?.content, left: left.map((r) => r.key) }).toEqual({ status: "completed", message: "set: 200", left: [] });
  });
});
