import type { ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runOf, startSteererAndPlain } from "../support/conversation-runners";
import { waitFor } from "../support/fake-platform";
import { messageEvent, type TestHost } from "../support/host";
import type { RunCall } from "../support/runner";

/**
 * A steering conversation handles a user's messages in the order it received them: a message answered `queued`
 * (it arrived while the run before it was answered `started` but not begun) is not overtaken by a later message
 * that the same run claims once it has begun.
 */
let setup: Awaited<ReturnType<typeof startSteererAndPlain>>;
let host: TestHost;
const handled = new Map<string, string[]>();
const runs = new Map<string, number>();
const note = (c: string, text: string) => handled.set(c, [...(handled.get(c) ?? []), text]);

async function behave(call: RunCall, res: ServerResponse) {
  const { w, conversation, text, api } = runOf(call, res);
  runs.set(conversation, (runs.get(conversation) ?? 0) + 1);
  note(conversation, text);
  // Every run holds until the test opens the gate, then takes what was claimed for it.
  await setup.gate(conversation).promise;
  for (const i of (await api("steering.pull")).body.data?.items ?? []) note(conversation, i.input.text);
  w.reply(`re: ${text}`);
}

beforeAll(async () => {
  setup = await startSteererAndPlain(behave, (steering) => [{ name: "default", label: { en_US: "r" }, capabilities: { streaming: true, steering }, permissions: {} }]);
  host = setup.host;
});
afterAll(async () => {
  await setup?.dispose();
});

describe("steer keeps the order of a user's messages", () => {
  it("a message sent once every earlier one was answered is handled after all of them", async () => {
    const results: { c: string; dispositions: string[]; order: string[] }[] = [];
    for (let round = 0; round < 4; round++) {
      const c = `steer-order-${round}`;
      await setup.agentFor(c, setup.steerer, { pull: "all" });
      // A burst: whichever is decided first starts, the others arrive before (or while) its run begins.
      const early = await Promise.all(Array.from({ length: 9 }, (_, i) => host.postEvent(messageEvent(c, `m${i}`))));
      await waitFor(() => (runs.get(c) ?? 0) >= 1, 10_000, "the first run");
      // Every earlier message has its answer: this one comes after them all.
      const last = await host.postEvent(messageEvent(c, "last"));
      setup.gate(c).resolve();
      for (const r of [...early, last]) if (r.body.disposition !== "steered") await host.waitForRun(r.body.run_id!);
      await waitFor(() => (handled.get(c) ?? []).length === 10, 10_000, "all handled");
      results.push({ c, dispositions: [...early, last].map((r) => r.body.disposition), order: handled.get(c)! });
      await new Promise((r) => setTimeout(r, 100));
    }
    const wrong = results.filter((r) => r.order.at(-1) !== "last");
    expect(wrong).toEqual([]);
  }, 60_000);
});
