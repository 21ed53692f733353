import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { putAgent } from "../support/scripted-runner";

/**
 * Two agents in one conversation: one answers messages (enqueue, the default
 * without steering), the other answers `api.invoked` in parallel. Parallel
 * runs take no turn: a queued message starts once the runs that take turns
 * before it have ended, not after a parallel run that arrived after it.
 */
let host: TestHost;
type Runner = Awaited<ReturnType<typeof startAdHocRunner>>;
let plain: Runner;
const gates = new Map<string, ReturnType<typeof deferred<void>>>();
const started: string[] = [];
const gate = (text: string) => {
  if (!gates.has(text)) gates.set(text, deferred());
  return gates.get(text)!;
};

beforeAll(async () => {
  plain = await startAdHocRunner({
    name: "plain",
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      const text: string = ctx.input.text ?? "";
      started.push(text);
      if (text.startsWith("hold")) await gate(text).promise;
      w.reply(text);
    },
  });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: plain.url })).status).toBe(201);
});
afterAll(async () => {
  for (const g of gates.values()) g.resolve();
  await host?.dispose();
  await plain?.close();
});

async function until(what: string, probe: () => boolean, timeoutMs = 10_000) {
  const end = Date.now() + timeoutMs;
  while (!probe()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe("enqueue order with a parallel agent in the same conversation", () => {
  it("a queued message starts when the runs before it end, not after a newer parallel run", async () => {
    const c = "order-mixed";
    for (const [id, types, concurrency] of [
      ["chat", ["message.received"], {}],
      ["jobs", ["api.invoked"], { strategy: "parallel" }],
    ] as const) {
      await putAgent(host, { agent_id: `${id}-${c}`, runner_id: plain.runnerId(), event_types: types, scope: { type: "conversation", id: c }, concurrency });
    }
    const first = await host.postEvent(messageEvent(c, "hold first"));
    expect(first.body.disposition).toBe("started");
    await until("the first message's run", () => started.includes("hold first"));
    const second = await host.postEvent(messageEvent(c, "second"));
    expect(second.body.disposition).toBe("queued");
    // A long job arrives after the second message and runs beside the first.
    const job = await host.postEvent({ ...messageEvent(c, "hold job"), event_type: "api.invoked" });
    expect(job.body.disposition).toBe("started");
    await until("the job's run", () => started.includes("hold job"));

    // The run before the second message ends: the second message is next.
    gate("hold first").resolve();
    expect((await host.waitForRun(first.body.run_id!)).status).toBe("completed");
    const secondRun = await host.waitForRun(second.body.run_id!, 5_000).catch((e: Error) => ({ status: `not ended: ${e.message.slice(0, 80)}` }));
    gate("hold job").resolve();
    expect(secondRun.status).toBe("completed");
  });
  it("a reject agent's message beside another agent's parallel run starts, and one beside a run that takes turns is rejected", async () => {
    const c = "reject-vs-parallel";
    await putAgent(host, { agent_id: `chat-${c}`, runner_id: plain.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: c }, concurrency: { strategy: "reject" } });
    await putAgent(host, { agent_id: `jobs-${c}`, runner_id: plain.runnerId(), event_types: ["api.invoked"], scope: { type: "conversation", id: c }, concurrency: { strategy: "parallel" } });
    const job = await host.postEvent({ ...messageEvent(c, "hold job 2"), event_type: "api.invoked" });
    expect(job.body.disposition).toBe("started");
    await until("the parallel job's run", () => started.includes("hold job 2"));

    const busy = await host.postEvent(messageEvent(c, "hold chat"));
    expect(busy.body.disposition).toBe("started");
    await until("the message's run", () => started.includes("hold chat"));
    const refused = await host.postEvent(messageEvent(c, "too soon"));
    expect([refused.body.disposition, refused.body.run_id]).toEqual(["rejected", null]);
    gate("hold chat").resolve();
    gate("hold job 2").resolve();
    expect((await host.waitForRun(busy.body.run_id!)).status).toBe("completed");
  });
});
