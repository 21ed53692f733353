import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { messageEvent, startTestHost, unhandedRun, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { putAgent } from "../support/scripted-runner";

/**
 * The cron's sweep of runs never handed over asks the conversation which runs it holds, then ends the others one by
 * one (a database read and a write each). A redelivery of the event that hands the run over in between (the platform
 * retrying for hours) must not have its run ended as `host.not_handed_over` after the conversation took it.
 */
const MINUTE_MS = 60_000;
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const release = deferred<void>();
const heard: string[] = [];

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "sweep-race",
    runners: [{ name: "default", label: { en_US: "sweep" }, capabilities: { streaming: true, steering: true }, permissions: { history: ["page"] } }],
    async onRun({ body }, res) {
      heard.push(`${body.context.run_id}:${body.context.input.text}`);
      const w = resultWriter(res, body.context.run_id);
      if (body.context.input.text === "busy") await release.promise;
      w.reply(`re: ${body.context.input.text}`);
    },
  });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
});
afterAll(async () => {
  release.resolve();
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
});
