import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { messageEvent, startTestHost, unhandedRun, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { putAgent } from "../support/scripted-runner";

/**
 * The cron's sweep of runs never handed over asks the conversation which runs it holds, then ends the others one by
 * one (a database read and a write each). A redelivery of the event that hands the run over in between (the platform
 * retrying for hours) must not have its run ended as `host.not_handed_over` after the conversation took it; nor may a
 * message its run dropped unpulled, whose run is `created` again while its new decision waits for the database.
 */
const MINUTE_MS = 60_000;
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const release = deferred<void>();
const holdEnds = deferred<void>();
const heard: string[] = [];

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "sweep-race",
    runners: [{ name: "default", label: { en_US: "sweep" }, capabilities: { streaming: true, steering: true }, permissions: { history: ["page"] } }],
    async onRun({ body }, res) {
      heard.push(`${body.context.run_id}:${body.context.input.text}`);
      const w = resultWriter(res, body.context.run_id);
      if (body.context.input.text === "busy") await release.promise;
      // Never pulls: what it claimed is dropped at its end, to be decided anew.
      if (body.context.input.text === "hold, never pull") await holdEnds.promise;
      w.reply(`re: ${body.context.input.text}`);
    },
  });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
});
afterAll(async () => {
  release.resolve();
  holdEnds.resolve();
  await host?.dispose();
  await runner?.close();
});

describe("the never-handed-over sweep racing a redelivery that hands the run over", () => {
  it("never leaves a run it ended waiting in the conversation, where the next message is steered into it and lost", async () => {
    const c = "sweep-vs-redelivery";
    // Messages go to a steering agent; the conversation is kept busy by another agent's run (an api.invoked event).
    await putAgent(host, { agent_id: `agent-${c}`, runner_id: runner.runnerId(), scope: { type: "conversation", id: c } });
    await putAgent(host, { agent_id: `busy-${c}`, runner_id: runner.runnerId(), scope: { type: "conversation", id: c }, event_types: ["api.invoked"] });
    const lost = await unhandedRun(host, c, "evt-sweep-race");
    const busy = await host.postEvent({ ...messageEvent(c, "busy"), event_type: "api.invoked" });
    expect(busy.body.disposition).toBe("started");

    // The sweep's first read of the lost run (after it asked which runs the conversation holds) is slow.
    host.databaseOutage({ delayMs: 2_500, matching: lost, queries: 1 });
    const sweep = host.triggerScheduled({ scheduledTime: new Date(Date.now() + 11 * MINUTE_MS) });
    await new Promise((r) => setTimeout(r, 1_000));
    // Meanwhile the platform sends the event again: it reaches the conversation, which (busy) keeps the run waiting.
    const again = await host.postEvent(messageEvent(c, "first", { event_id: "evt-sweep-race" }));
    expect(again.body).toMatchObject({ disposition: "duplicate", run_id: lost });
    await sweep;
    const lostNow = (await host.admin("GET", `/v1/runs/${lost}`)).body;

    // The next message of the conversation: it must be handled by a run that is still to end.
    const next = await host.postEvent(messageEvent(c, "next message"));
    release.resolve();
    expect((await host.waitForRun(busy.body.run_id!)).status).toBe("completed");
    const handledBy = await host.waitForRun(next.body.run_id!, 10_000);
    const ranNext = heard.some((h) => h.endsWith(":next message"));
    expect({ lost: lostNow.status === "completed" || lostNow.status === "failed", steeredIntoEnded: next.body.run_id === lost && lostNow.status !== "created", ranNext, handledBy: handledBy.status }).toEqual({
      lost: true,
      steeredIntoEnded: false,
      ranNext: true,
      handledBy: "completed",
    });
  });

  it("leaves a message its run dropped unpulled, taken back but not decided anew yet (the database away), for that decision: it is answered", async () => {
    const c = "sweep-vs-decided-anew";
    await putAgent(host, { agent_id: `agent-${c}`, runner_id: runner.runnerId(), scope: { type: "conversation", id: c } });
    const held = await host.postEvent(messageEvent(c, "hold, never pull"));
    await waitUntil(() => heard.some((h) => h.startsWith(`${held.body.run_id}:`)));
    const steered = await host.postEvent(messageEvent(c, "answer me", { event_id: "evt-sweep-anew" }));
    expect(steered.body).toMatchObject({ disposition: "steered", run_id: held.body.run_id });
    // Its claim is taken back (its own run `created` again, as ingress left it long ago); the read of its last words that
    // comes next fails until the cron's sweep has come, so its new decision waits (retried after a pause) meanwhile.
    host.databaseOutage({ queries: 1000, matching: "'$.edited'" });
    holdEnds.resolve();
    expect((await host.waitForRun(held.body.run_id!)).status).toBe("completed");
    const own = await waitUntil(async () => {
      const event = (await host.admin("GET", "/v1/events/evt-sweep-anew")).body;
      return event.disposition === "bound" ? (event.run_id as string) : null;
    });
    try {
      await host.triggerScheduled({ scheduledTime: new Date(Date.now() + 11 * MINUTE_MS) });
    } finally {
      host.databaseOutage({ queries: 0 });
    }
    const answered = await host.waitForRun(own, 20_000);
    expect({ status: answered.status, content: answered.message?.content }).toEqual({ status: "completed", content: "re: answer me" });
  }, 40_000);
});

async function waitUntil<T>(check: () => T | Promise<T>, timeoutMs = 10_000): Promise<NonNullable<T>> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (Date.now() > end) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 25));
  }
}
