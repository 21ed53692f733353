import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi, deferred } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * An agent moved from one steering runner to another while its run waited (README: an edit made while a run is queued
 * applies to it): the run runs on the new runner, and the run row says so. A message claimed by that run afterwards
 * must name the runner that actually holds it (EventLog `claimed_runner_id`, the SteeringInputItem's `runner_id`,
 * the steering.injected record), not the one the agent had when the run was queued.
 */
let host: TestHost;
let svc: Awaited<ReturnType<typeof startAdHocRunner>>;
const release = deferred<void>();
const seen: string[] = [];
const items: any[] = [];
const caps = { streaming: true, steering: true };

beforeAll(async () => {
  svc = await startAdHocRunner({
    name: "two",
    runners: [
      { name: "a", label: { en_US: "a" }, capabilities: caps },
      { name: "b", label: { en_US: "b" }, capabilities: caps },
    ],
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      seen.push(body.runner_id);
      await release.promise;
      const r = await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "steering.pull", { mode: "all" });
      items.push(...(r.body.data?.items ?? []));
      w.reply("done");
    },
  });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: svc.url })).status).toBe(201);
});
afterAll(async () => {
  release.resolve();
  await host?.dispose();
  await svc?.close();
});

describe("a claim into a run whose agent moved to another steering runner before it started", () => {
  it("names the runner the run runs on", async () => {
    const c = "rv-moved";
    const agent = (runnerId: string) => ({ name: c, runner_id: runnerId, event_types: ["message.received"], scope: { type: "conversation", id: c }, concurrency: { strategy: "steer", debounce_ms: 1000 } });
    expect((await host.admin("POST", "/v1/admin/agents", { agent_id: `agent-${c}`, ...agent(svc.runnerId("a")) })).status).toBe(201);
    const first = await host.postEvent(messageEvent(c, "first"));
    expect(first.body.disposition).toBe("started");
    expect((await host.admin("PUT", `/v1/admin/agents/agent-${c}`, agent(svc.runnerId("b")))).status).toBe(200);
    const end = Date.now() + 10_000;
    while (seen.length === 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
    expect(seen).toEqual([svc.runnerId("b")]);

    const second = await host.postEvent(messageEvent(c, "second", { event_id: "rv-moved-2" }));
    expect(second.body).toMatchObject({ disposition: "steered", run_id: first.body.run_id });
    release.resolve();
    const run = await host.waitForRun(first.body.run_id!);
    const event = await host.admin("GET", "/v1/events/rv-moved-2");
    const injected = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE event_type = 'steering.injected' AND run_id = ?", [first.body.run_id!]);
    expect({
      run_runner: run.runner_id,
      claimed_runner_id: event.body.metadata.steering.claimed_runner_id,
      item_runner_id: items.map((i) => i.runner_id),
      injected_runner_id: injected.map((r) => JSON.parse(r.data_json).runner_id),
    }).toEqual({
      run_runner: svc.runnerId("b"),
      claimed_runner_id: svc.runnerId("b"),
      item_runner_id: [svc.runnerId("b")],
      injected_runner_id: [svc.runnerId("b")],
    });
  });
});
