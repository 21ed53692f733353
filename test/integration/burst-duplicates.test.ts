import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ServerResponse } from "node:http";
import { messageEvent, type TestHost } from "../support/host";
import type { RunCall } from "../support/runner";
import { runOf, startSteererAndPlain } from "../support/conversation-runners";
import { waitFor } from "../support/fake-platform";

/** A burst where each event is sent several times at once (a client retrying): each message handled once. */
let setup: Awaited<ReturnType<typeof startSteererAndPlain>>;
let host: TestHost;
const calls = new Map<string, string[]>();
const pulledBy = new Map<string, string[]>();

async function behave(call: RunCall, res: ServerResponse) {
  const { ctx, w, conversation, text, api } = runOf(call, res);
  calls.set(conversation, [...(calls.get(conversation) ?? []), text]);
  if (text.startsWith("hold")) await setup.gate(conversation).promise;
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

const texts = (c: string) => calls.get(c) ?? [];
async function repeatedBurst(c: string, n: number, copies: number) {
  const all = await Promise.all(Array.from({ length: n * copies }, (_, k) => host.postEvent(messageEvent(c, `m${k % n}`, { event_id: `${c}-e${k % n}` }))));
  return all;
}

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
