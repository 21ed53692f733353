import { beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { messageEvent, type TestHost } from "../support/host";
import { useHeldStateWriter } from "../support/held-state-writer";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * README "State": "deleting the agent deletes the state it wrote, and an agent created again under the same id
 * starts with none ... A run still going when its agent is deleted writes no more state (its state.set answers as
 * usual; nothing is kept, migration 0012)". Migration 0012's trigger only asks whether *an* agent of that id exists:
 * once another agent has been created under the id, what the deleted agent's run still writes (a state.set, a
 * state.updated result, the claim's conversation seed of a queued run) is kept, under the old agent's scope keys
 * (old state epoch) and the new agent's id: readable by no agent, and kept for as long as the new agent lives.
 */
const writer = useHeldStateWriter("recreated-state", { holding: "hold" });
const { arrived, release } = writer;
let host: TestHost;
let runner: (typeof writer)["runner"];
beforeAll(() => void ({ host, runner } = writer));

const agentBody = (id: string, conversation: string) => ({
  agent_id: id,
  name: id,
  runner_id: runner.runnerId(),
  event_types: ["message.received"],
  scope: { type: "conversation", id: conversation },
  state_policy: { enable_state: true, state_scopes: ["conversation"] },
});
const rowsOf = (agentId: string) => host.query<{ key: string }>("SELECT key FROM runner_state WHERE agent_id = ? ORDER BY key", [agentId]).then((rows) => rows.map((r) => r.key));

describe("an agent deleted and created again under its id while its runs are in flight or queued", () => {
  it("keeps nothing the deleted agent's in-flight run writes afterwards", async () => {
    const c = "recreated-mid-run";
    expect((await host.admin("POST", "/v1/admin/agents", agentBody("phoenix", c))).status).toBe(201);
    const posted = await host.postEvent(messageEvent(c, "hold"));
    await arrived.promise;
    expect((await host.admin("DELETE", "/v1/admin/agents/phoenix?runs=leave")).status).toBe(200);
    expect((await host.admin("POST", "/v1/admin/agents", agentBody("phoenix", c))).status).toBe(201);
    // What the deleted agent wrote before (its run's conversation seed) is the cron's to delete.
    await host.triggerScheduled();
    release.resolve();
    const run = await host.waitForRun(posted.body.run_id!);
    expect(run.status).toBe("completed");
    // The new agent has not run yet: it wrote nothing, and the old one's writes are not kept.
    expect(await rowsOf("phoenix")).toEqual([]);
  });

  it("keeps no conversation seed of a queued run that fails because its agent was created anew", async () => {
    const c = "recreated-queued";
    const gate = deferred<void>();
    // A second service whose runs wait for the gate: the agent's first run keeps the conversation busy.
    const holder = await startAdHocRunner({
      name: "recreated-holder",
      async onRun({ body }, res) {
        const w = resultWriter(res, body.context.run_id);
        await gate.promise;
        w.reply("held");
      },
    });
    try {
      expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: holder.url })).status).toBe(201);
      expect((await host.admin("POST", "/v1/admin/agents", { ...agentBody("ember", c), runner_id: holder.runnerId() })).status).toBe(201);
      const held = await host.postEvent(messageEvent(c, "first"));
      expect(held.body.disposition).toBe("started");
      const queued = await host.postEvent(messageEvent(c, "second"));
      expect(queued.body.disposition).toBe("queued");
      expect((await host.admin("DELETE", "/v1/admin/agents/ember?runs=leave")).status).toBe(200);
      expect((await host.admin("POST", "/v1/admin/agents", { ...agentBody("ember", c), runner_id: holder.runnerId() })).status).toBe(201);
      // The seed its first run wrote before the delete is the cron's to delete.
      await host.triggerScheduled();
      gate.resolve();
      await host.waitForRun(held.body.run_id!);
      const run = await host.waitForRun(queued.body.run_id!);
      expect(run.error?.code).toBe("host.agent_unavailable");
      // The recreated agent never ran: no state of it exists.
      expect(await rowsOf("ember")).toEqual([]);
    } finally {
      gate.resolve();
      await holder.close();
    }
  });
});
