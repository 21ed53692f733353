import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * README "Effective access": a queued run whose agent was deleted and created anew under its id fails with
 * `host.agent_unavailable`; the new agent "never bound the queued event" (queued-agent-recreated.test.ts). Its run
 * row must then not claim to be the new agent's runner's run: `GET /v1/runs/{id}` must name the runner the run was
 * bound to, the one its own `run.failed` record names, not a runner it was never sent to.
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
  first = await startAdHocRunner({ name: "unavail-first", onRun: behave("first") });
  second = await startAdHocRunner({ name: "unavail-second", onRun: behave("second") });
  host = await startTestHost();
  for (const r of [first, second]) expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: r.url })).status).toBe(201);
});
afterAll(async () => {
  gate.resolve();
  await host?.dispose();
  await first?.close();
  await second?.close();
});

describe("a queued run failed because its agent is gone", () => {
  it("keeps the runner it was bound to, not the runner of the agent now holding its id", async () => {
    const conv = "unavail-runner";
    const body = { agent_id: "unavail-agent", name: "a", runner_id: first.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: conv } };
    expect((await host.admin("POST", "/v1/admin/agents", body)).status).toBe(201);
    const held = await host.postEvent(messageEvent(conv, "hold"));
    const probe = await host.postEvent(messageEvent(conv, "probe"));
    expect(probe.body.disposition).toBe("queued");
    expect((await host.admin("DELETE", "/v1/admin/agents/unavail-agent")).status).toBe(204);
    expect((await host.admin("POST", "/v1/admin/agents", { ...body, runner_id: second.runnerId(), scope: { type: "conversation", id: "unavail-elsewhere" } })).status).toBe(201);
    gate.resolve();
    await host.waitForRun(held.body.run_id!);
    const run = await host.waitForRun(probe.body.run_id!);
    expect(run.error?.code).toBe("host.agent_unavailable");
    expect(second.calls).toHaveLength(0);
    const [record] = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE event_type = 'run.failed' AND run_id = ?", [probe.body.run_id]);
    expect(JSON.parse(record.data_json).runner_id).toBe(first.runnerId());
    // The run row agrees with its own record: it was never the second runner's.
    expect(run.runner_id).toBe(first.runnerId());
  });
});
