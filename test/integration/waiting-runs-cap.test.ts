import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { keyedGates } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { putAgent } from "../support/scripted-runner";

/**
 * A conversation's object keeps the runs waiting to begin in memory: at most 100 of them, and 32 MiB of their jobs
 * (an API event may carry MAX_EVENT_BODY_BYTES of data). An event past either is rejected, whatever the strategy,
 * recorded as such, with why (`metadata.rejection`); the runs already waiting are untouched, and the conversation
 * takes events again once they ran.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const { gate, releaseAll } = keyedGates();

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "waiting",
    async onRun({ body }, res) {
      const ctx = body.context;
      if (ctx.input.text === "hold") await gate(ctx.conversation.conversation_id).promise;
      resultWriter(res, ctx.run_id).reply(`re: ${ctx.input.text}`);
    },
  });
  host = await startTestHost({ vars: { MAX_EVENT_BODY_BYTES: String(5 * 1024 * 1024) } });
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
});
afterAll(async () => {
  releaseAll();
  await host?.dispose();
  await runner?.close();
});

async function busy(c: string) {
  await putAgent(host, { agent_id: `agent-${c}`, runner_id: runner.runnerId(), scope: { type: "conversation", id: c }, concurrency: { strategy: "enqueue" } });
  const held = await host.postEvent(messageEvent(c, "hold"));
  expect(held.body.disposition).toBe("started");
}

describe("runs waiting in one conversation", () => {
  it("are at most 100: the next event is rejected and recorded so, and the waiting ones all run", async () => {
    const c = "waiting-count";
    await busy(c);
    const queued: string[] = [];
    for (let i = 0; i < 100; i++) {
      const r = await host.postEvent(messageEvent(c, `q${i}`));
      expect(r.body.disposition).toBe("queued");
      queued.push(r.body.run_id!);
    }
    const over = await host.postEvent(messageEvent(c, "one too many"));
    expect(over.body).toMatchObject({ disposition: "rejected", run_id: null });
    const recorded = (await host.admin("GET", `/v1/events/${over.body.event_id}`)).body;
    expect(recorded.disposition).toBe("rejected");
    // Why, as the record says it: the waiting room, not the agent's strategy (enqueue).
    expect(recorded.metadata.rejection).toEqual({ reason: "waiting_room_full", waiting_runs: 100, waiting_bytes: expect.any(Number), event_bytes: expect.any(Number), max_runs: 100, max_bytes: 32 * 1024 * 1024 });
    gate(c).resolve();
    expect((await host.waitForRun(queued.at(-1)!)).message?.content).toBe("re: q99");
    expect((await host.postEvent(messageEvent(c, "room again"))).body.disposition).toBe("started");
  });

  it("hold at most 32 MiB of jobs: a large event past it is rejected, a small one still waits", async () => {
    const c = "waiting-bytes";
    await busy(c);
    const big = (i: number) => messageEvent(c, `big ${i}`, { data: { blob: "x".repeat(4_000_000) } });
    for (let i = 0; i < 8; i++) expect((await host.postEvent(big(i))).body.disposition).toBe("queued");
    const over = await host.postEvent(big(8));
    expect(over.body.disposition).toBe("rejected");
    const { rejection } = (await host.admin("GET", `/v1/events/${over.body.event_id}`)).body.metadata;
    expect(rejection).toMatchObject({ reason: "waiting_room_full", waiting_runs: 8, max_bytes: 32 * 1024 * 1024 });
    expect(rejection.waiting_bytes + rejection.event_bytes).toBeGreaterThan(rejection.max_bytes);
    const small = await host.postEvent(messageEvent(c, "small"));
    expect(small.body.disposition).toBe("queued");
    gate(c).resolve();
    expect((await host.waitForRun(small.body.run_id!)).message?.content).toBe("re: small");
  });
});
