import type { ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runOf, startSteererAndPlain } from "../support/conversation-runners";
import { waitFor } from "../support/fake-platform";
import { messageEvent, type TestHost } from "../support/host";
import type { RunCall } from "../support/runner";

/**
 * PROTOCOL §8/§10 as a steering runner relies on them: `steering.pull` takes at most its `limit` (one item in
 * `one-at-a-time`, whatever the limit), in claim order, leaving the rest for the next pull; and a run is given only
 * messages of its own conversation (same bot, workspace, conversation and thread).
 */
let setup: Awaited<ReturnType<typeof startSteererAndPlain>>;
let host: TestHost;
const started = new Map<string, number>();

async function behave(call: RunCall, res: ServerResponse) {
  const { w, conversation, text, api } = runOf(call, res);
  started.set(conversation, (started.get(conversation) ?? 0) + 1);
  if (!text.startsWith("hold")) return w.reply(JSON.stringify({ text }));
  await setup.gate(conversation).promise;
  const texts = async (params: Record<string, unknown>) => ((await api("steering.pull", params)).body.data.items as any[]).map((i) => i.input.text as string);
  const pages = [await texts(text === "hold paged" ? { mode: "one-at-a-time", limit: 5 } : { mode: "all" })];
  // Then at most two a pull, until a pull answers none.
  while (text === "hold paged" && pages.length < 10 && (pages.length === 1 || pages.at(-1)!.length > 0)) pages.push(await texts({ mode: "all", limit: 2 }));
  w.reply(JSON.stringify({ text, pages }));
}

beforeAll(async () => {
  setup = await startSteererAndPlain(behave, (steering) => [{ name: "default", label: { en_US: "r" }, capabilities: { streaming: true, steering }, permissions: { events: ["page"] } }]);
  host = setup.host;
});
afterAll(async () => {
  await setup?.dispose();
});

const reply = async (runId: string) => JSON.parse((await host.waitForRun(runId)).message!.content as string);

/** Holds a run of a steering agent in `c`; answers its run id once its runner has it. */
async function heldRun(c: string, text: string): Promise<string> {
  await setup.agentFor(c, setup.steerer);
  const first = await host.postEvent(messageEvent(c, text));
  await waitFor(() => started.get(c) === 1, 10_000, "the held run to start");
  return first.body.run_id!;
}

describe("steering.pull", () => {
  it("pulls no more than a pull's limit, in claim order, the rest left for the next pull; one-at-a-time takes one whatever the limit", async () => {
    const c = "pull-paged";
    const held = await heldRun(c, "hold paged");
    for (const n of ["a", "b", "c", "d"]) expect((await host.postEvent(messageEvent(c, n))).body.disposition).toBe("steered");
    setup.gate(c).resolve();
    expect((await reply(held)).pages).toEqual([["a"], ["b", "c"], ["d"], []]);
    // Each pulled once, none left to drop at the run's end.
    const { items } = (await host.admin("GET", `/v1/conversations/events?conversation_id=${c}&limit=100`)).body;
    expect(items.filter((e: any) => e.event_type === "steering.injected")).toHaveLength(4);
    expect(items.filter((e: any) => e.event_type === "steering.dropped")).toEqual([]);
  });

  it("is given only its own conversation's messages: another thread, bot or workspace with the same conversation_id starts a run of its own", async () => {
    const c = "pull-elsewhere";
    const held = await heldRun(c, "hold");
    for (const where of [{ thread_id: "t-1" }, { bot_id: "bot-other" }, { workspace_id: "ws-other" }]) {
      const text = `in ${Object.values(where)[0]}`;
      const other = await host.postEvent(messageEvent(c, text, where));
      expect({ text, disposition: other.body.disposition }).toEqual({ text, disposition: "started" });
      expect((await reply(other.body.run_id!)).text).toBe(text);
    }
    // The same conversation's message, sent last, is the only one the held run is given.
    expect((await host.postEvent(messageEvent(c, "here"))).body.disposition).toBe("steered");
    setup.gate(c).resolve();
    expect((await reply(held)).pages).toEqual([["here"]]);
  });
});
