import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * README "Effective access": a queued run whose agent was "deleted and created anew under its id" fails with
 * host.agent_unavailable: the new agent is another agent (README "State": "an agent created again under the same id
 * starts with none"). README "A busy conversation": a message is claimed only by a run of its own agent, and PROTOCOL
 * §10 / README "Steering": "Another agent's run never receives the message: one event, one binding". So a message
 * bound to the recreated agent must not be claimed by the deleted agent's run still waiting in its debounce window:
 * that run fails when it starts, and the claimed message would be dropped, never answered.
 */
let host: TestHost;
let steerer: Awaited<ReturnType<typeof startAdHocRunner>>;
const seen: string[] = [];

beforeAll(async () => {
  steerer = await startAdHocRunner({
    name: "steerer-recreated",
    runners: [{ name: "default", label: { en_US: "s" }, capabilities: { streaming: true, steering: true } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      seen.push(ctx.input.text);
      const pulled = (await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "steering.pull")).body as any;
      for (const item of pulled?.data?.items ?? []) seen.push(item.input?.text);
      w.reply(`answered ${ctx.input.text}`);
    },
  });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: steerer.url })).status).toBe(201);
});
afterAll(async () => {
  await host?.dispose();
  await steerer?.close();
});

describe("a message for an agent deleted and created anew while the old one's run waits", () => {
  it("is not claimed by the deleted agent's run, and gets answered", async () => {
    const c = "steer-recreated";
    const agent = { agent_id: "steer-recreated", name: c, runner_id: steerer.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: c }, concurrency: { strategy: "steer", debounce_ms: 1500 } };
    expect((await host.admin("POST", "/v1/admin/agents", agent)).status).toBe(201);
    const first = await host.postEvent(messageEvent(c, "first"));
    expect(first.body.disposition).toBe("started");
    // Within the debounce window the operator deletes the agent and creates it anew under the same id; then the user writes.
    expect((await host.admin("DELETE", `/v1/admin/agents/${agent.agent_id}?runs=leave`)).status).toBe(200);
    expect((await host.admin("POST", "/v1/admin/agents", agent)).status).toBe(201);
    const second = await host.postEvent(messageEvent(c, "second"));
    expect((await host.waitForRun(first.body.run_id!)).error?.code).toBe("host.agent_unavailable");
    // "second" belongs to the new agent: its own run, answered; never claimed by the deleted agent's run and dropped.
    expect(second.body.run_id).not.toBe(first.body.run_id);
    expect(second.body.disposition).not.toBe("steered");
    expect((await host.waitForRun(second.body.run_id!)).message?.content).toBe("answered second");
    const dropped = await host.query<{ n: number }>("SELECT COUNT(*) AS n FROM event_log WHERE event_type = 'steering.dropped'");
    expect(Number(dropped[0].n)).toBe(0);
  });
});
