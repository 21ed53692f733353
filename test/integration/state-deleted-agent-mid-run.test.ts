import { beforeAll, describe, expect, it } from "vitest";
import { messageEvent, type TestHost } from "../support/host";
import { useHeldStateWriter } from "../support/held-state-writer";

/**
^ * README "State": "State belongs to the agent as created: deleting the agent deletes the state it wrote" (retention
 * deletes it, in bounded batches). An agent
 * deleted while one of its runs is in flight: what that run writes afterwards (a state.updated result, a state.set
 * call, the conversation seed) is state the deleted agent wrote: it is not written (migration 0012), where it
 * used to be left behind, readable by no agent and deleted by nothing.
 */
const writer = useHeldStateWriter("stateful");
const { arrived, release } = writer;
let host: TestHost;
let runner: (typeof writer)["runner"];
beforeAll(() => void ({ host, runner } = writer));

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
