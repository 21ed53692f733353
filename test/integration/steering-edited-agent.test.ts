import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi, deferred } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * PROTOCOL §10: a message is claimed only by a run whose runner steers and
 * whose `available_apis.steering_pull` is true. A run queued before its agent
 * was moved to a runner without steering runs on the new runner (README: an
 * edit made while a run is queued applies to it), so it cannot pull: a message
 * (the agent chose `strategy: "steer"` explicitly)
 * must not be claimed by it (it would be dropped, never answered).
 */
let host: TestHost;
type Runner = Awaited<ReturnType<typeof startAdHocRunner>>;
let steerer: Runner;
let plain: Runner;
const release = deferred<void>();
const seen: { runner: string; text: string; steeringPull: boolean }[] = [];

const base = { streaming: true };
const onRun = (runner: string) => async ({ body }: { body: any }, res: import("node:http").ServerResponse) => {
  const ctx = body.context;
  const w = resultWriter(res, ctx.run_id);
  seen.push({ runner, text: ctx.input.text, steeringPull: ctx.context.available_apis.steering_pull });
  if (String(ctx.input.text).startsWith("hold")) await release.promise;
  let pulled: unknown = null;
  if (ctx.context.available_apis.steering_pull) pulled = (await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "steering.pull")).body;
  w.reply(JSON.stringify({ text: ctx.input.text, pulled }));
};

beforeAll(async () => {
  steerer = await startAdHocRunner({ name: "steerer", runners: [{ name: "default", label: { en_US: "s" }, capabilities: { ...base, steering: true } }], onRun: onRun("steerer") });
  plain = await startAdHocRunner({ name: "plain", runners: [{ name: "default", label: { en_US: "p" }, capabilities: base }], onRun: onRun("plain") });
  host = await startTestHost();
  for (const r of [steerer, plain]) expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: r.url })).status).toBe(201);
});
afterAll(async () => {
  release.resolve();
  await host?.dispose();
  await steerer?.close();
  await plain?.close();
});

describe("steering claims follow the runner the run actually has", () => {
  it("a run whose agent moved to a non-steering runner while it was queued does not claim new messages", async () => {
    const c = "edited-agent";
    const agent = (runnerId: string) => ({
      name: c,
      runner_id: runnerId,
      event_types: ["message.received"],
      scope: { type: "conversation", id: c },
      concurrency: { strategy: "steer", debounce_ms: 1500 },
    });
    expect((await host.admin("POST", "/v1/admin/agents", { agent_id: `agent-${c}`, ...agent(steerer.runnerId()) })).status).toBe(201);
    const first = await host.postEvent(messageEvent(c, "hold first"));
    expect(first.body.disposition).toBe("started");
    // While the first run waits out its debounce, the operator moves the agent to a runner without steering.
    expect((await host.admin("PUT", `/v1/admin/agents/agent-${c}`, agent(plain.runnerId()))).status).toBe(200);
    const end = Date.now() + 10_000;
    while (!seen.some((s) => s.text === "hold first") && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
    expect(seen.find((s) => s.text === "hold first")).toMatchObject({ runner: "plain", steeringPull: false });

    // The run cannot pull: the next message must not be absorbed into it.
    const second = await host.postEvent(messageEvent(c, "second", { event_id: "edited-agent-2" }));
    release.resolve();
    await host.waitForRun(first.body.run_id!);
    const dropped = await host.query<{ n: number }>("SELECT COUNT(*) AS n FROM event_log WHERE event_type = 'steering.dropped'");
    expect({ disposition: second.body.disposition, dropped: Number(dropped[0].n) }).toEqual({ disposition: "queued", dropped: 0 });
  });

  it("a steering runner's run may pull only when its agent steers (by default or by choice), not under another strategy", async () => {
    const pullOf = async (c: string, concurrency?: Record<string, unknown>) => {
      const agent = { agent_id: `agent-${c}`, name: c, runner_id: steerer.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: c }, ...(concurrency ? { concurrency } : {}) };
      expect((await host.admin("POST", "/v1/admin/agents", agent)).status).toBe(201);
      const run = await host.waitForRun((await host.postEvent(messageEvent(c, `pull ${c}`))).body.run_id!);
      expect(run.status).toBe("completed");
      return seen.find((s) => s.text === `pull ${c}`)!.steeringPull;
    };
    expect(await pullOf("strategy-default")).toBe(true);
    expect(await pullOf("strategy-steer", { strategy: "steer" })).toBe(true);
    for (const strategy of ["enqueue", "interrupt", "reject", "parallel"]) expect([strategy, await pullOf(`strategy-${strategy}`, { strategy })]).toEqual([strategy, false]);
  });
});
