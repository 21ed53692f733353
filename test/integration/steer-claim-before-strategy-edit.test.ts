import { afterAll, beforeAll, expect, it } from "vitest";
import { callHostApi } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * A message claimed (answered "steered") by a run still in its debounce window must reach that run: if the operator
 * then moves the agent to another strategy before the run starts, the run still holds the claim, so it must be able
 * to pull it (else the message answered "steered" is dropped, never answered).
 */
let host: TestHost;
let steerer: Awaited<ReturnType<typeof startAdHocRunner>>;
const seen: { text: string; steeringPull: boolean; pulled: unknown }[] = [];

beforeAll(async () => {
  steerer = await startAdHocRunner({
    name: "steerer-edit",
    runners: [{ name: "default", label: { en_US: "s" }, capabilities: { streaming: true, steering: true } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      let pulled: unknown = null;
      if (ctx.context.available_apis.steering_pull) pulled = (await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "steering.pull")).body;
      seen.push({ text: ctx.input.text, steeringPull: ctx.context.available_apis.steering_pull, pulled });
      w.reply("ok");
    },
  });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: steerer.url })).status).toBe(201);
});
afterAll(async () => {
  await host?.dispose();
  await steerer?.close();
});

it("a message claimed by a queued run is not dropped when the agent's strategy is edited before the run starts", async () => {
  const c = "claim-then-edit";
  const agent = (strategy: string) => ({ name: c, runner_id: steerer.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: c }, concurrency: { strategy, debounce_ms: 1500 } });
  expect((await host.admin("POST", "/v1/admin/agents", { agent_id: `agent-${c}`, ...agent("steer") })).status).toBe(201);
  const first = await host.postEvent(messageEvent(c, "first"));
  expect(first.body.disposition).toBe("started");
  const second = await host.postEvent(messageEvent(c, "second", { event_id: `${c}-2` }));
  expect(second.body.disposition).toBe("steered");
  // Before the run leaves its debounce window, the operator changes the strategy.
  expect((await host.admin("PUT", `/v1/admin/agents/agent-${c}`, agent("enqueue"))).status).toBe(200);
  const run = await host.waitForRun(first.body.run_id!);
  expect(run.status).toBe("completed");
  const dropped = await host.query<{ n: number }>("SELECT COUNT(*) AS n FROM event_log WHERE event_type = 'steering.dropped'");
  const injected = await host.query<{ n: number }>("SELECT COUNT(*) AS n FROM event_log WHERE event_type = 'steering.injected'");
  expect({ steeringPull: seen.find((s) => s.text === "first")?.steeringPull, dropped: Number(dropped[0].n), injected: Number(injected[0].n) }).toEqual({ steeringPull: true, dropped: 0, injected: 1 });
});
