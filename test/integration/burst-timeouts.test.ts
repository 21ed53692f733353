import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ServerResponse } from "node:http";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner, type RunCall } from "../support/runner";
import { waitFor } from "../support/fake-platform";
import { putAgent } from "../support/scripted-runner";
import { deferred, keyedGates } from "../support/host-api";

/**
 * Bursts whose active run times out, and debounced bursts: order kept, nothing lost or doubled. Each burst must be
 * answered while the run before it is still busy: a deadline of 3 s leaves a loaded machine's slow POSTs room, and
 * a run that need not time out is held ("hold", until its conversation's gate opens) instead.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const calls = new Map<string, string[]>();
const never = deferred();
const { gate, releaseAll } = keyedGates();

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "bt",
    async onRun({ body }: RunCall, res: ServerResponse) {
      const ctx = body.context;
      const c = ctx.conversation.conversation_id as string;
      const text = ctx.input.text as string;
      calls.set(c, [...(calls.get(c) ?? []), text]);
      if (text.startsWith("stall")) await Promise.race([never.promise, new Promise((r) => setTimeout(r, 6000))]);
      if (text.startsWith("hold")) await gate(c).promise;
      resultWriter(res, ctx.run_id).reply(`re: ${text}`);
    },
  });
  host = await startTestHost({ vars: { RUN_DEADLINE_MS: "3000" } });
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
});
afterAll(async () => {
  never.resolve();
  releaseAll();
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
    // The first is held until all are answered: one POST slower than the window and its run would find it over.
    for (let i = 0; i < 6; i++) answers.push(await host.postEvent(messageEvent(c, i === 0 ? "hold d0" : `d${i}`)));
    gate(c).resolve();
    expect(answers.map((a) => a.body.disposition)).toEqual(["started", ...Array(5).fill("queued")]);
    for (const a of answers) expect((await host.waitForRun(a.body.run_id!)).status).toBe("completed");
    expect(texts(c)).toEqual(["hold d0", "d1", "d2", "d3", "d4", "d5"]);
  });

  it("debounced interrupt burst: only the last runs", async () => {
    const c = "t-debounce-interrupt";
    // Each must come within the window of the one before (none may reach the runner): a second's margin per POST.
    await agent(c, { strategy: "interrupt", debounce_ms: 1000 });
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
    const first = await host.postEvent(messageEvent(c, "hold"));
    await waitFor(() => texts(c).includes("hold"), 10_000, "hold");
    const answers = [];
    for (let i = 0; i < 4; i++) answers.push(await host.postEvent(messageEvent(c, `q${i}`)));
    expect((await host.admin("POST", `/v1/runs/${answers[1].body.run_id}/cancel`)).status).toBe(202);
    expect((await host.admin("POST", `/v1/runs/${answers[1].body.run_id}/cancel`)).status).toBe(409);
    gate(c).resolve();
    await host.waitForRun(first.body.run_id!);
    for (const a of [answers[0], answers[2], answers[3]]) expect((await host.waitForRun(a.body.run_id!)).status).toBe("completed");
    expect((await host.waitForRun(answers[1].body.run_id!)).status).toBe("cancelled");
    expect(texts(c)).toEqual(["hold", "q0", "q2", "q3"]);
  });
});
