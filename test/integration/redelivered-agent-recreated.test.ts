import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, unhandedRun, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * README "Effective access": a run whose agent was "deleted and created anew under its id" before it started fails
 * with host.agent_unavailable (queued-agent-recreated.test.ts). A run that never reached its conversation and is
 * handed over by a repeat of its event (README, `duplicate`) is the same run of the same event, bound to the agent
 * as it was created then: a new agent under the old id (new state epoch, here another runner) must not run it.
 */
let host: TestHost;
type Runner = Awaited<ReturnType<typeof startAdHocRunner>>;
let first: Runner;
let second: Runner;

const behave = (name: string) =>
  async function ({ body }: { body: any }, res: import("node:http").ServerResponse) {
    resultWriter(res, body.context.run_id).reply(`${name}: ${body.context.input.text}`);
  };

beforeAll(async () => {
  first = await startAdHocRunner({ name: "redeliv-recreated-first", onRun: behave("first") });
  second = await startAdHocRunner({ name: "redeliv-recreated-second", onRun: behave("second") });
  host = await startTestHost();
  for (const r of [first, second]) expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: r.url })).status).toBe(201);
});
afterAll(async () => {
  await host?.dispose();
  await first?.close();
  await second?.close();
});

describe("a run never handed over, whose agent was deleted and created anew under its id, handed over by a repeat", () => {
  it("fails with host.agent_unavailable instead of running under the new agent", async () => {
    const conv = "redeliv-recreated";
    const body = { agent_id: "redeliv-recreated-agent", name: "a", runner_id: first.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: conv } };
    expect((await host.admin("POST", "/v1/admin/agents", body)).status).toBe(201);
    const lost = await unhandedRun(host, conv, "evt-redeliv-recreated");
    expect(first.calls).toHaveLength(1);
    expect((await host.admin("DELETE", `/v1/admin/agents/${body.agent_id}`)).status).toBe(204);
    // A fresh agent under the same id (new state epoch), on another runner, binding the same conversation.
    expect((await host.admin("POST", "/v1/admin/agents", { ...body, runner_id: second.runnerId() })).status).toBe(201);

    const again = await host.postEvent(messageEvent(conv, "first", { event_id: "evt-redeliv-recreated" }));
    expect(again.status).toBe(200);
    expect(again.body.disposition).toBe("duplicate");
    const run = await host.waitForRun(lost);
    expect(second.calls.map((c) => c.body.context.run_id)).not.toContain(lost);
    expect(run.status).toBe("failed");
    expect(run.error?.code).toBe("host.agent_unavailable");
    // Its row agrees with its own run.failed record: the runner it was bound to, never the new agent's.
    const [record] = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE event_type = 'run.failed' AND run_id = ?", [lost]);
    expect([run.runner_id, JSON.parse(record.data_json).runner_id]).toEqual([first.runnerId(), first.runnerId()]);
  });

  it("an agent only edited meanwhile (moved to another runner) still runs it, as it would a queued run", async () => {
    const conv = "redeliv-edited";
    const body = { agent_id: "redeliv-edited-agent", name: "a", runner_id: first.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: conv } };
    expect((await host.admin("POST", "/v1/admin/agents", body)).status).toBe(201);
    const lost = await unhandedRun(host, conv, "evt-redeliv-edited");
    expect((await host.admin("PUT", `/v1/admin/agents/${body.agent_id}`, { ...body, runner_id: second.runnerId() })).status).toBe(200);
    const again = await host.postEvent(messageEvent(conv, "first", { event_id: "evt-redeliv-edited" }));
    expect(again.body).toMatchObject({ disposition: "duplicate", run_id: lost });
    const run = await host.waitForRun(lost);
    expect(run.status).toBe("completed");
    expect(run.message?.content).toBe("second: first");
  });
});
