import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi, deferred } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * README "Bursts (concurrency.debounce_ms): a run's start is delayed; with a
 * steering runner, the messages of the window are claimed by that run and wait
 * in its queue when it begins, so one run answers the burst." A burst that
 * arrives while the conversation is busy with another agent's run (a join
 * handled by a welcome agent) should still be answered by one run.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const releaseWelcome = deferred();
const pulled: string[] = [];

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "debounce-busy",
    runners: [{ name: "default", label: { en_US: "d" }, capabilities: { streaming: true, steering: true }, permissions: { history: ["page"] } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      if (ctx.event.event_type === "group.member_joined") {
        await releaseWelcome.promise;
        return w.reply("welcome");
      }
      const r = await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "steering.pull", { mode: "all" });
      pulled.push(...(r.body.data?.items ?? []).map((i: any) => i.input.text));
      w.reply(`answered ${ctx.input.text}`);
    },
  });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
  const scope = { type: "conversation", id: "busy-burst" };
  expect((await host.admin("POST", "/v1/admin/agents", { agent_id: "welcome", name: "welcome", runner_id: runner.runnerId(), event_types: ["group.member_joined"], scope })).status).toBe(201);
  expect(
    (await host.admin("POST", "/v1/admin/agents", { agent_id: "chat", name: "chat", runner_id: runner.runnerId(), event_types: ["message.received"], scope, concurrency: { strategy: "steer", debounce_ms: 1500 } })).status,
  ).toBe(201);
});
afterAll(async () => {
  releaseWelcome.resolve();
  await host?.dispose();
  await runner?.close();
});

describe("a debounced burst while another agent's run is active", () => {
  it("is claimed by the burst's first run, so one run answers it", async () => {
    const join = await host.postEvent({ event_type: "group.member_joined", conversation_id: "busy-burst", actor: { actor_type: "user", actor_id: "u2" } });
    expect(join.body.disposition).toBe("started");
    const m1 = await host.postEvent(messageEvent("busy-burst", "m1"));
    const m2 = await host.postEvent(messageEvent("busy-burst", "m2"));
    const m3 = await host.postEvent(messageEvent("busy-burst", "m3"));
    setTimeout(() => releaseWelcome.resolve(), 300);
    const dispositions = [m1, m2, m3].map((m) => m.body.disposition);
    const runIds = new Set([m1, m2, m3].map((m) => m.body.run_id));
    for (const id of runIds) await host.waitForRun(id!);
    expect({ dispositions, runs: runIds.size, pulled }).toEqual({ dispositions: ["queued", "steered", "steered"], runs: 1, pulled: ["m2", "m3"] });
  });
});
