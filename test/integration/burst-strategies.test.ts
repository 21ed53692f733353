import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ServerResponse } from "node:http";
import { messageEvent, type TestHost } from "../support/host";
import type { RunCall } from "../support/runner";
import { runOf, startSteererAndPlain } from "../support/conversation-runners";
import { waitFor } from "../support/fake-platform";
import { putAgent } from "../support/scripted-runner";

/** Concurrent bursts into one conversation under each strategy, and with each event sent several times at once: nothing lost, nothing run twice. */
let setup: Awaited<ReturnType<typeof startSteererAndPlain>>;
let host: TestHost;
const calls = new Map<string, { runId: string; text: string }[]>();
const pulledBy = new Map<string, string[]>();

async function behave(call: RunCall, res: ServerResponse) {
  const { ctx, w, conversation, text, api } = runOf(call, res);
  calls.set(conversation, [...(calls.get(conversation) ?? []), { runId: ctx.run_id, text }]);
  if (text.startsWith("hold")) await setup.gate(conversation).promise;
  if (text.includes("fail")) {
    w.send("run.failed", { code: "test.failed", error: "asked to fail", retryable: false });
    return void res.end();
  }
  if (ctx.context.available_apis.steering_pull === true && ctx.config.pull === "all") {
    const items = (await api("steering.pull")).body.data.items as any[];
    pulledBy.set(ctx.run_id, items.map((i) => i.input.text));
  }
  w.reply(`re: ${text}`);
}

beforeAll(async () => {
  setup = await startSteererAndPlain(behave, (steering) => [{ name: "default", label: { en_US: steering ? "s" : "p" }, capabilities: { streaming: true, steering }, permissions: { events: ["get", "page"] } }]);
  host = setup.host;
});
afterAll(async () => setup?.dispose());

const texts = (c: string) => (calls.get(c) ?? []).map((x) => x.text);
const burst = (c: string, n: number, prefix = "m", extra: Record<string, unknown> = {}) => Promise.all(Array.from({ length: n }, (_, i) => host.postEvent(messageEvent(c, `${prefix}${i}`, extra))));
async function busy(c: string) {
  const held = await host.postEvent(messageEvent(c, "hold"));
  expect(held.body.disposition).toBe("started");
  await waitFor(() => texts(c).includes("hold"), 10_000, "the held run");
  return held.body.run_id!;
}
/** Each of n events sent `copies` times at once (a client retrying). */
async function repeatedBurst(c: string, n: number, copies: number) {
  const all = await Promise.all(Array.from({ length: n * copies }, (_, k) => host.postEvent(messageEvent(c, `m${k % n}`, { event_id: `${c}-e${k % n}` }))));
  return all;
}
const status = async (runId: string) => (await host.admin("GET", `/v1/runs/${runId}`)).body.status as string;

describe("bursts into one busy conversation", () => {
  it("enqueue: every event queued, each runs exactly once", async () => {
    const c = "b-enqueue";
    await setup.agentFor(c, setup.plain, { concurrency: { strategy: "enqueue" } });
    const held = await busy(c);
    const answers = await burst(c, 20);
    expect(answers.map((a) => a.body.disposition)).toEqual(Array(20).fill("queued"));
    setup.gate(c).resolve();
    await host.waitForRun(held);
    for (const a of answers) expect((await host.waitForRun(a.body.run_id!)).status).toBe("completed");
    expect(texts(c).slice().sort()).toEqual(["hold", ...answers.map((_, i) => `m${i}`)].sort());
  });

  it("interrupt: the held run is cancelled, exactly one burst run completes, none waits forever", async () => {
    const c = "b-interrupt";
    await setup.agentFor(c, setup.plain, { concurrency: { strategy: "interrupt" } });
    const held = await busy(c);
    const answers = await burst(c, 10, "hold-i");
    expect(answers.map((a) => a.body.disposition)).toEqual(Array(10).fill("started"));
    expect((await host.waitForRun(held)).status).toBe("cancelled");
    // the survivor holds too; wait for it to begin, then let it go
    await waitFor(async () => (await Promise.all(answers.map((a) => status(a.body.run_id!)))).filter((s) => s === "cancelled").length === 9, 15_000, "nine superseded");
    setup.gate(c).resolve();
    const ends = await Promise.all(answers.map((a) => host.waitForRun(a.body.run_id!).then((r) => r.status)));
    expect(ends.filter((s) => s === "completed")).toHaveLength(1);
    expect(ends.filter((s) => s === "cancelled")).toHaveLength(9);
  });

  it("reject: every burst event rejected, nothing runs", async () => {
    const c = "b-reject";
    await setup.agentFor(c, setup.plain, { concurrency: { strategy: "reject" } });
    const held = await busy(c);
    const answers = await burst(c, 10);
    expect(answers.map((a) => [a.body.disposition, a.body.run_id])).toEqual(Array(10).fill(["rejected", null]));
    setup.gate(c).resolve();
    await host.waitForRun(held);
    expect(texts(c)).toEqual(["hold"]);
  });

  it("parallel: every event starts and runs once", async () => {
    const c = "b-parallel";
    await setup.agentFor(c, setup.plain, { concurrency: { strategy: "parallel" } });
    const held = await busy(c);
    const answers = await burst(c, 10);
    expect(answers.map((a) => a.body.disposition)).toEqual(Array(10).fill("started"));
    for (const a of answers) expect((await host.waitForRun(a.body.run_id!)).status).toBe("completed");
    setup.gate(c).resolve();
    await host.waitForRun(held);
    expect(texts(c).slice().sort()).toEqual(["hold", ...answers.map((_, i) => `m${i}`)].sort());
  });

  it("steer: every event claimed by the held run and pulled exactly once, in claim order = transcript order", async () => {
    const c = "b-steer";
    await setup.agentFor(c, setup.steerer, { pull: "all" });
    const held = await busy(c);
    const answers = await burst(c, 15);
    expect(answers.map((a) => [a.body.disposition, a.body.run_id])).toEqual(Array(15).fill(["steered", held]));
    setup.gate(c).resolve();
    await host.waitForRun(held);
    const pulled = pulledBy.get(held)!;
    expect(pulled.slice().sort()).toEqual(answers.map((_, i) => `m${i}`).sort());
    expect(texts(c)).toEqual(["hold"]);
  });

  it("waiting-room cap under a concurrent burst: exactly 100 queued, the rest rejected, the queued all run once", async () => {
    const c = "b-cap";
    await setup.agentFor(c, setup.plain, { concurrency: { strategy: "enqueue" } });
    const held = await busy(c);
    const answers = await burst(c, 110);
    const by = (d: string) => answers.filter((a) => a.body.disposition === d);
    expect([by("queued").length, by("rejected").length]).toEqual([100, 10]);
    setup.gate(c).resolve();
    await host.waitForRun(held);
    for (const a of by("queued")) expect((await host.waitForRun(a.body.run_id!)).status).toBe("completed");
    expect(texts(c)).toHaveLength(101);
  }, 90_000);

  it("queued runs go on after the active one fails, or is cancelled", async () => {
    const c = "b-after-fail";
    await setup.agentFor(c, setup.plain, { concurrency: { strategy: "enqueue" } });
    const failing = await host.postEvent(messageEvent(c, "hold fail"));
    await waitFor(() => texts(c).includes("hold fail"), 10_000, "the failing run");
    const answers = await burst(c, 5, "hold q");
    expect(answers.map((a) => a.body.disposition)).toEqual(Array(5).fill("queued"));
    setup.gate(c).resolve();
    expect((await host.waitForRun(failing.body.run_id!)).status).toBe("failed");
    // the first queued run holds on the (already resolved) gate: every one completes
    for (const a of answers) expect((await host.waitForRun(a.body.run_id!)).status).toBe("completed");

    const c2 = "b-after-cancel";
    await setup.agentFor(c2, setup.plain, { concurrency: { strategy: "enqueue" } });
    const held = await busy(c2);
    const queued = await burst(c2, 5);
    expect((await host.admin("POST", `/v1/runs/${held}/cancel`)).status).toBe(202);
    expect((await host.waitForRun(held)).status).toBe("cancelled");
    for (const a of queued) expect((await host.waitForRun(a.body.run_id!)).status).toBe("completed");
  });

  it("two agents taking turns in one conversation: an interleaved burst runs each event once", async () => {
    const c = "b-two";
    for (const [id, types] of [["chat", ["message.received"]], ["jobs", ["api.invoked"]]] as const)
      await putAgent(host, { agent_id: `${id}-${c}`, runner_id: setup.plain.runnerId(), event_types: types, scope: { type: "conversation", id: c }, concurrency: { strategy: "enqueue" } });
    const held = await busy(c);
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => host.postEvent({ ...messageEvent(c, `t${i}`), ...(i % 2 ? { event_type: "api.invoked" } : {}) })));
    expect(answers.map((a) => a.body.disposition)).toEqual(Array(12).fill("queued"));
    setup.gate(c).resolve();
    await host.waitForRun(held);
    for (const a of answers) expect((await host.waitForRun(a.body.run_id!)).status).toBe("completed");
    expect(texts(c)).toHaveLength(13);
  });
});

describe("a burst of events each sent several times at once", () => {
  it("steer: each message claimed and pulled once", async () => {
    const c = "dup-steer";
    await setup.agentFor(c, setup.steerer, { pull: "all" });
    const held = await host.postEvent(messageEvent(c, "hold"));
    await waitFor(() => texts(c).includes("hold"), 10_000, "held");
    const all = await repeatedBurst(c, 30, 3);
    setup.gate(c).resolve();
    await host.waitForRun(held.body.run_id!);
    const pulled = pulledBy.get(held.body.run_id!)!;
    const counts: Record<string, number> = {};
    for (const t of pulled) counts[t] = (counts[t] ?? 0) + 1;
    expect(Object.entries(counts).filter(([, n]) => n !== 1)).toEqual([]);
    expect(pulled.length).toBe(30);
    expect(all.every((a) => a.body.run_id === held.body.run_id)).toBe(true);
  });

  it("enqueue: each message runs once", async () => {
    const c = "dup-enqueue";
    await setup.agentFor(c, setup.plain, { concurrency: { strategy: "enqueue" } });
    const held = await host.postEvent(messageEvent(c, "hold"));
    await waitFor(() => texts(c).includes("hold"), 10_000, "held");
    const all = await repeatedBurst(c, 30, 3);
    setup.gate(c).resolve();
    for (const id of new Set(all.map((a) => a.body.run_id!))) await host.waitForRun(id);
    expect((await host.waitForRun(held.body.run_id!)).status).toBe("completed");
    const counts: Record<string, number> = {};
    for (const t of texts(c)) counts[t] = (counts[t] ?? 0) + 1;
    expect(Object.entries(counts).filter(([, n]) => n !== 1)).toEqual([]);
    expect(texts(c).length).toBe(31);
  });

  it("interrupt: each repeat names the event's run; exactly one survives", async () => {
    const c = "dup-interrupt";
    await setup.agentFor(c, setup.plain, { concurrency: { strategy: "interrupt" } });
    const held = await host.postEvent(messageEvent(c, "hold"));
    await waitFor(() => texts(c).includes("hold"), 10_000, "held");
    const all = await repeatedBurst(c, 10, 3);
    const ids = new Set(all.map((a) => a.body.run_id!));
    expect(ids.size).toBe(10);
    const ends = await Promise.all([...ids].map((id) => host.waitForRun(id).then((r) => r.status)));
    expect(ends.filter((s) => s === "completed")).toHaveLength(1);
    // The run the burst interrupted ends cancelled.
    expect((await host.waitForRun(held.body.run_id!)).status).toBe("cancelled");
    const counts: Record<string, number> = {};
    for (const t of texts(c)) counts[t] = (counts[t] ?? 0) + 1;
    expect(Object.entries(counts).filter(([, n]) => n !== 1)).toEqual([]);
  });
});
