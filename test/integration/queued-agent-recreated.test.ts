import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * README "Effective access": "a run queued behind a busy conversation starts with its agent as it is then ...
 * and an agent deleted or disabled meanwhile fails it with host.agent_unavailable". An agent deleted and then
 * created anew under the same id (a fresh agent: new state epoch, here another scope and runner) is still an
 * agent deleted meanwhile: the queued event must not be run by the new one, which never bound it.
 */
let host: TestHost;
type Runner = Awaited<ReturnType<typeof startAdHocRunner>>;
let first: Runner;
let second: Runner;
const gate = deferred<void>();

const behave = (name: string) =>
  async function ({ body }: { body: any }, res: import("node:http").ServerResponse) {
    const ctx = body.context;
    const w = resultWriter(res, ctx.run_id);
    if (ctx.input.text === "hold") await gate.promise;
    w.reply(`${name}: ${ctx.input.text}`);
  };

beforeAll(async () => {
  first = await startAdHocRunner({ name: "recreated-first", onRun: behave("first") });
  second = await startAdHocRunner({ name: "recreated-second", onRun: behave("second") });
  host = await startTestHost();
  for (const r of [first, second]) expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: r.url })).status).toBe(201);
});
afterAll(async () => {
  gate.resolve();
  await host?.dispose();
  await first?.close();
  await second?.close();
});

describe("a queued run whose agent was deleted and another created under its id", () => {
  it("fails with host.agent_unavailable instead of running under the new agent", async () => {
    const conv = "recreated";
    const body = { agent_id: "recreated-agent", name: "a", runner_id: first.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: conv } };
    expect((await host.admin("POST", "/v1/admin/agents", body)).status).toBe(201);
    const held = await host.postEvent(messageEvent(conv, "hold"));
    expect(held.body.disposition).toBe("started");
    const probe = await host.postEvent(messageEvent(conv, "probe"));
    expect(probe.body.disposition).toBe("queued");
    expect((await host.admin("DELETE", "/v1/admin/agents/recreated-agent?runs=leave")).status).toBe(200);
    // A new agent under the same id: another conversation, another runner. It never bound the queued event.
    const again = await host.admin("POST", "/v1/admin/agents", { ...body, runner_id: second.runnerId(), scope: { type: "conversation", id: "recreated-elsewhere" } });
    expect(again.status).toBe(201);
    gate.resolve();
    await host.waitForRun(held.body.run_id!);
    const run = await host.waitForRun(probe.body.run_id!);
    expect(second.calls).toHaveLength(0);
    expect(run.status).toBe("failed");
    expect(run.error?.code).toBe("host.agent_unavailable");
    // Its row agrees with its own run.failed record: the runner it was bound to, never the new agent's.
    const [record] = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE event_type = 'run.failed' AND run_id = ?", [probe.body.run_id]);
    expect([run.runner_id, JSON.parse(record.data_json).runner_id]).toEqual([first.runnerId(), first.runnerId()]);
  });
});
