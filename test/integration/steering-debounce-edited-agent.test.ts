import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * A message arriving while its agent's debounced run waits is claimed for that run (README "Bursts"). If the
 * operator moves the agent to a runner without steering during that window (README: an edit made while a run is
 * queued applies to it), the run can never pull the message: it must not be claimed for it (and then dropped,
 * never answered). steering-edited-agent.test.ts covers a message arriving after the run started; this one arrives
 * during the debounce, after the edit.
 */
let host: TestHost;
type Runner = Awaited<ReturnType<typeof startAdHocRunner>>;
let steerer: Runner;
let plain: Runner;
const seen: { runner: string; text: string; steeringPull: boolean }[] = [];

const onRun = (runner: string) => async ({ body }: { body: any }, res: import("node:http").ServerResponse) => {
  const ctx = body.context;
  const w = resultWriter(res, ctx.run_id);
  seen.push({ runner, text: ctx.input.text, steeringPull: ctx.context.available_apis.steering_pull });
  let pulled: unknown = null;
  if (ctx.context.available_apis.steering_pull) pulled = (await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "steering.pull")).body;
  w.reply(JSON.stringify({ text: ctx.input.text, pulled }));
};

beforeAll(async () => {
  steerer = await startAdHocRunner({ name: "steerer", runners: [{ name: "default", label: { en_US: "s" }, capabilities: { streaming: true, steering: true } }], onRun: onRun("steerer") });
  plain = await startAdHocRunner({ name: "plain", runners: [{ name: "default", label: { en_US: "p" }, capabilities: { streaming: true } }], onRun: onRun("plain") });
  host = await startTestHost();
  for (const r of [steerer, plain]) expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: r.url })).status).toBe(201);
});
afterAll(async () => {
  await host?.dispose();
  await steerer?.close();
  await plain?.close();
});

describe("a debounced run whose agent is edited while it waits", () => {
  it("a message arriving in the window after the agent moved to a runner without steering is not claimed by it and dropped", async () => {
    const c = "debounce-edited";
    const agent = (runnerId: string) => ({ name: c, runner_id: runnerId, event_types: ["message.received"], scope: { type: "conversation", id: c }, concurrency: { strategy: "steer", debounce_ms: 2000 } });
    expect((await host.admin("POST", "/v1/admin/agents", { agent_id: `agent-${c}`, ...agent(steerer.runnerId()) })).status).toBe(201);
    const first = await host.postEvent(messageEvent(c, "first"));
    expect(first.body.disposition).toBe("started");
    // Within the debounce window: the operator moves the agent, then the user writes again.
    expect((await host.admin("PUT", `/v1/admin/agents/agent-${c}`, agent(plain.runnerId()))).status).toBe(200);
    const second = await host.postEvent(messageEvent(c, "second", { event_id: "debounce-edited-2" }));
    await host.waitForRun(first.body.run_id!);
    await new Promise((r) => setTimeout(r, 1000));
    const dropped = await host.query<{ n: number }>("SELECT COUNT(*) AS n FROM event_log WHERE event_type = 'steering.dropped'");
    // "second" must be answered by some run: its own, or pulled by the first (which cannot pull: it runs on `plain`).
    expect({ first: seen.find((s) => s.text === "first"), second: second.body.disposition, answered: seen.some((s) => s.text === "second"), dropped: Number(dropped[0].n) }).toEqual({
      first: { runner: "plain", text: "first", steeringPull: false },
      second: "queued",
      answered: true,
      dropped: 0,
    });
  });
});
