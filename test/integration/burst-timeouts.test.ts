import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ServerResponse } from "node:http";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner, type RunCall } from "../support/runner";
import { waitFor } from "../support/fake-platform";
import { putAgent } from "../support/scripted-runner";
import { deferred } from "../support/host-api";

/** Bursts whose active run times out, and debounced bursts: order kept, nothing lost or doubled. */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const calls = new Map<string, string[]>();
const never = deferred();

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "bt",
    async onRun({ body }: RunCall, res: ServerResponse) {
      const ctx = body.context;
      const c = ctx.conversation.conversation_id as string;
      const text = ctx.input.text as string;
      calls.set(c, [...(calls.get(c) ?? []), text]);
      if (text.startsWith("stall")) await Promise.race([never.promise, new Promise((r) => setTimeout(r, 6000))]);
      resultWriter(res, ctx.run_id).reply(`re: ${text}`);
    },
  });
  host = await startTestHost({ vars: { RUN_DEADLINE_MS: "1500" } });
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
});
afterAll(async () => {
  never.resolve();
  await host?.dispose();
  await runner?.close();
});
const agent = (c: string, concurrency: Record<string, unknown>) => putAgent(host, { agent_id: `a-${c}`, runner_id: runner.runnerId(), scope: { type: "conversation", id: c }, concurrency });
const texts = (c: string) => calls.get(c) ?? [];

describe("bursts and ends", () => {
  it("queued runs go on, in order, after the active one times out", async () => {
    const c = "t-timeout";
    await agent(c, { strategy: "enqueue" });
    const first = await host.postEvent(messageEvent(c, "stall"));
    await waitFor(() => texts(c).includes("stall"), 10_000, "stall");
    const answers = [];
    for (let i = 0; i < 5; i++) answers.push(await host.postEvent(messageEvent(c, `q${i}`)));
    expect(answers.map((a) => a.body.disposition)).toEqual(Array(5).fill("queued"));
    expect((await host.waitForRun(first.body.run_id!)).status).toBe("timeout");
    for (const a of answers) expect((await host.waitForRun(a.body.run_id!)).status).toBe("completed");
    expect(texts(c)).toEqual(["stall", "q0", "q1", "q2", "q3", "q4"]);
  });

  it("debounced enqueue burst runs in arrival order, each once", async () => {
    const c = "t-debounce-enqueue";
    await agent(c, { strategy: "enqueue", debounce_ms: 300 });
    const answers = [];
    for (let i = 0; i < 6; i++) answers.push(await host.postEvent(messageEvent(c, `d${i}`)));
    expect(answers.map((a) => a.body.disposition)).toEqual(["started", ...Array(5).fill("queued")]);
    for (const a of answers) expect((await host.waitForRun(a.body.run_id!)).status).toBe("completed");
    expect(texts(c)).toEqual(["d0", "d1", "d2", "d3", "d4", "d5"]);
  });

  it("debounced interrupt burst: only the last runs", async () => {
    const c = "t-debounce-interrupt";
    await agent(c, { strategy: "interrupt", debounce_ms: 300 });
    const answers = [];
    for (let i = 0; i < 5; i++) answers.push(await host.postEvent(messageEvent(c, `i${i}`)));
    expect(answers.map((a) => a.body.disposition)).toEqual(Array(5).fill("started"));
    const ends = [];
    for (const a of answers) ends.push((await host.waitForRun(a.body.run_id!)).status);
    expect(ends).toEqual(["cancelled", "cancelled", "cancelled", "cancelled", "completed"]);
    expect(texts(c)).toEqual(["i4"]);
  });

  it("a queued run cancelled mid-burst never runs, the others keep their order", async () => {
    const c = "t-cancel-middle";
    await agent(c, { strategy: "enqueue" });
    const first = await host.postEvent(messageEvent(c, "stall"));
    await waitFor(() => texts(c).includes("stall"), 10_000, "stall");
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push(await host.postEvent(messageEvent(c, `q${i}`)));
    expect((await host.admin("POST", `/v1/runs/${answers[1].body.run_id}/cancel`)).status).toBe(202);
    expect((await host.admin("POST", `/v1/runs/${answers[1].body.run_id}/cancel`)).status).toBe(409);
    await host.waitForRun(first.body.run_id!);
    for (const a of [answers[0], answers[2], answers[3]]) expect((await host.waitForRun(a.body.run_id!)).status).toBe("completed");
    expect((await host.waitForRun(answers[1].body.run_id!)).status).toBe("cancelled");
    expect(texts(c)).toEqual(["stall", "q0", "q2", "q3"]);
  });
});
