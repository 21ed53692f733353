import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi, deferred } from "../support/host-api";
import { waitFor } from "../support/fake-platform";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * A steering agent's messages that queue behind another agent's run (a join handled by a welcome agent) are
 * handled in the order the conversation received them: a message sent once the first one's run has begun is not
 * handled before the message sent before it, which waits in a run of its own.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const releaseWelcome = deferred();
const releaseChat = deferred();
const handled: string[] = [];

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "order-busy",
    runners: [{ name: "default", label: { en_US: "d" }, capabilities: { streaming: true, steering: true }, permissions: {} }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      if (ctx.event.event_type === "group.member_joined") {
        await releaseWelcome.promise;
        return w.reply("welcome");
      }
      handled.push(ctx.input.text);
      await releaseChat.promise;
      const r = await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "steering.pull", { mode: "all" });
      handled.push(...(r.body.data?.items ?? []).map((i: any) => i.input.text));
      w.reply(`answered ${ctx.input.text}`);
    },
  });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
  const scope = { type: "conversation", id: "order-busy" };
  expect((await host.admin("POST", "/v1/admin/agents", { agent_id: "welcome", name: "welcome", runner_id: runner.runnerId(), event_types: ["group.member_joined"], scope })).status).toBe(201);
  expect((await host.admin("POST", "/v1/admin/agents", { agent_id: "chat", name: "chat", runner_id: runner.runnerId(), event_types: ["message.received"], scope, concurrency: { strategy: "steer" } })).status).toBe(201);
});
afterAll(async () => {
  releaseWelcome.resolve();
  releaseChat.resolve();
  await host?.dispose();
  await runner?.close();
});

describe("steer behind another agent's run", () => {
  it("m1 and m2 wait behind the welcome run; m3, sent once m1's run has begun, is handled after m2", async () => {
    const join = await host.postEvent({ event_type: "group.member_joined", conversation_id: "order-busy", actor: { actor_type: "user", actor_id: "u2" } });
    expect(join.body.disposition).toBe("started");
    const m1 = await host.postEvent(messageEvent("order-busy", "m1"));
    const m2 = await host.postEvent(messageEvent("order-busy", "m2"));
    releaseWelcome.resolve();
    await waitFor(() => handled.includes("m1"), 10_000, "m1's run to begin");
    const m3 = await host.postEvent(messageEvent("order-busy", "m3"));
    releaseChat.resolve();
    for (const m of [m1, m2, m3]) if (m.body.disposition !== "steered") await host.waitForRun(m.body.run_id!);
    await waitFor(() => handled.length === 3, 10_000, "all three handled");
    expect({ dispositions: [m1, m2, m3].map((m) => m.body.disposition), handled }).toMatchObject({ handled: ["m1", "m2", "m3"] });
  });
});
