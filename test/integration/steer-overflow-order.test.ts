import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi, deferred } from "../support/host-api";
import { waitFor } from "../support/fake-platform";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * README: a run's steering queue holds at most 100 items; "beyond that the event falls back to the agent's
 * strategy". The message that overflowed waits in a run of its own; a message sent after it must not be handed
 * to the earlier run (once that run has pulled and has room again) ahead of it.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const firstPull = deferred();
const secondPull = deferred();
const handled: string[] = [];
let firstRunPulled = false;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "overflow-order",
    runners: [{ name: "default", label: { en_US: "o" }, capabilities: { streaming: true, steering: true }, permissions: {} }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      const pull = async () => handled.push(...((await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "steering.pull", { mode: "all" })).body.data?.items ?? []).map((i: any) => i.input.text));
      handled.push(ctx.input.text);
      if (ctx.input.text === "first") {
        await firstPull.promise;
        await pull();
        firstRunPulled = true;
        await secondPull.promise;
      }
      await pull();
      w.reply(`answered ${ctx.input.text}`);
    },
  });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
  expect((await host.admin("POST", "/v1/admin/agents", { agent_id: "chat", name: "chat", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: "ovf" }, concurrency: { strategy: "steer" } })).status).toBe(201);
});
afterAll(async () => {
  firstPull.resolve();
  secondPull.resolve();
  await host?.dispose();
  await runner?.close();
});

describe("steering queue overflow", () => {
  it("a message sent after the one that overflowed is handled after it", async () => {
    const first = await host.postEvent(messageEvent("ovf", "first"));
    await waitFor(() => handled.includes("first"), 10_000, "the first run");
    for (let i = 0; i < 100; i += 20) {
      const batch = await Promise.all(Array.from({ length: 20 }, (_, j) => host.postEvent(messageEvent("ovf", `m${i + j}`))));
      expect(batch.map((b) => b.body.disposition)).toEqual(batch.map(() => "steered"));
    }
    const overflow = await host.postEvent(messageEvent("ovf", "overflow"));
    expect(overflow.body.disposition).toBe("queued");
    firstPull.resolve();
    await waitFor(() => firstRunPulled, 10_000, "the first run's pull");
    const after = await host.postEvent(messageEvent("ovf", "after"));
    secondPull.resolve();
    for (const r of [first, overflow, after]) if (r.body.disposition !== "steered") await host.waitForRun(r.body.run_id!);
    await waitFor(() => handled.length === 103, 10_000, "all handled");
    expect(handled.slice(-2)).toEqual(["overflow", "after"]);
  });
});
