import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { messageEvent, readSse, startTestHost, unhandedRun, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { putAgent, runLedger } from "../support/scripted-runner";

/**
 * A run ingress recorded but whose hand-over to its conversation failed, and
 * whose event was never sent again: the cron job asks the conversation about
 * it once it is past the hand-over grace (10 minutes) and ends it as failed
 * (`host.not_handed_over`), so it does not show as waiting forever. A run its
 * conversation holds (waiting its turn) and a recent one are left alone.
 */
const MINUTE_MS = 60_000;
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const release = deferred<void>();
const rejectingBusy = deferred<void>();

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "handover",
    async onRun({ body }, res) {
      const w = resultWriter(res, body.context.run_id);
      if (body.context.input.text === "busy") await release.promise;
      if (body.context.input.text === "rejecting busy") await rejectingBusy.promise;
      w.reply(`re: ${body.context.input.text}`);
    },
  });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
});
afterAll(async () => {
  release.resolve();
  rejectingBusy.resolve();
  await host?.dispose();
  await runner?.close();
});

const statusOf = async (runId: string) => (await host.admin("GET", `/v1/runs/${runId}`)).body;

describe("runs never handed over to their conversation", () => {
  it("are ended as failed by the cron job once past the grace, and a late redelivery starts nothing", async () => {
    const c = "never-handed";
    await putAgent(host, { agent_id: `agent-${c}`, runner_id: runner.runnerId(), scope: { type: "conversation", id: c } });
    const lost = await unhandedRun(host, c, "evt-never-handed");
    const follower = fetch(`${host.url}/v1/runs/${lost}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` } });

    // Within the grace it may still be on its way: left alone.
    await host.triggerScheduled({ scheduledTime: new Date(Date.now() + 5 * MINUTE_MS) });
    expect((await statusOf(lost)).status).toBe("created");

    await host.triggerScheduled({ scheduledTime: new Date(Date.now() + 11 * MINUTE_MS) });
    const ended = await statusOf(lost);
    expect(ended.status).toBe("failed");
    expect(ended.error.code).toBe("host.not_handed_over");
    const ledger = await runLedger(host, lost);
    expect(ledger.map((e: { type: string; origin: string }) => `${e.origin}:${e.type}`)).toEqual(["host:run.failed"]);
    expect(await host.query("SELECT event_type FROM event_log WHERE run_id = ? AND event_type = 'run.failed'", [lost])).toHaveLength(1);
    // A follower that waited for the hand-over hears the end.
    const stream = await readSse(await follower);
    expect(stream.end).toBe("failed");

    // Ended once: a second sweep changes nothing.
    await host.triggerScheduled({ scheduledTime: new Date(Date.now() + 12 * MINUTE_MS) });
    expect(Number((await host.query<{ n: number }>("SELECT COUNT(*) AS n FROM run_event WHERE run_id = ?", [lost]))[0].n)).toBe(1);

    // The event arriving again now is a duplicate of an ended run: nothing starts.
    const again = await host.postEvent(messageEvent(c, "first", { event_id: "evt-never-handed" }));
    expect(again.body).toMatchObject({ disposition: "duplicate", run_id: lost });
    expect((await statusOf(lost)).status).toBe("failed");
  });

  it("leaves a run its conversation holds, however long it has waited", async () => {
    const c = "held-waiting";
    await putAgent(host, { agent_id: `agent-${c}`, runner_id: runner.runnerId(), scope: { type: "conversation", id: c }, concurrency: { strategy: "enqueue" } });
    const busy = await host.postEvent(messageEvent(c, "busy"));
    const waiting = await host.postEvent(messageEvent(c, "next"));
    expect(waiting.body.disposition).toBe("queued");

    await host.triggerScheduled({ scheduledTime: new Date(Date.now() + 60 * MINUTE_MS) });
    expect((await statusOf(waiting.body.run_id!)).status).toBe("created");

    release.resolve();
    expect((await host.waitForRun(busy.body.run_id!)).status).toBe("completed");
    const done = await host.waitForRun(waiting.body.run_id!);
    expect(done.status).toBe("completed");
    expect(done.message?.content).toBe("re: next");
  });
  it("a redelivery that hands such a run to a conversation that now rejects it answers duplicate naming no run (the first one is gone)", async () => {
    const c = "handed-late-rejected";
    await putAgent(host, { agent_id: `agent-${c}`, runner_id: runner.runnerId(), scope: { type: "conversation", id: c }, concurrency: { strategy: "reject" } });
    const lost = await unhandedRun(host, c, "evt-handed-late-rejected");
    const busy = await host.postEvent(messageEvent(c, "rejecting busy"));
    expect(busy.body.disposition).toBe("started");
    const again = await host.postEvent(messageEvent(c, "first", { event_id: "evt-handed-late-rejected" }));
    expect(again.body).toEqual({ event_id: "evt-handed-late-rejected", disposition: "duplicate", run_id: null });
    expect((await host.admin("GET", "/v1/events/evt-handed-late-rejected")).body).toMatchObject({ disposition: "rejected" });
    expect((await host.admin("GET", `/v1/runs/${lost}`)).status).toBe(404);
    rejectingBusy.resolve();
    expect((await host.waitForRun(busy.body.run_id!)).status).toBe("completed");
  });
  it("one conversation whose object keeps failing does not keep the sweep from the others, and the invocation says it failed", async () => {
    const failing = "handed-failing";
    const healthy = "handed-healthy";
    for (const c of [failing, healthy]) await putAgent(host, { agent_id: `agent-${c}`, runner_id: runner.runnerId(), scope: { type: "conversation", id: c } });
    // Oldest first: the failing conversation's run comes before the healthy one's.
    const stuck = await unhandedRun(host, failing, "evt-handed-failing");
    const lost = await unhandedRun(host, healthy, "evt-handed-healthy");
    host.databaseOutage({ queries: 1000, matching: stuck });
    try {
      await expect(host.triggerScheduled({ scheduledTime: new Date(Date.now() + 11 * MINUTE_MS) })).rejects.toThrow(/outcome exception/);
    } finally {
      host.databaseOutage({ queries: 0 });
    }
    expect((await statusOf(lost)).error?.code).toBe("host.not_handed_over");
    expect((await statusOf(stuck)).status).toBe("created");
    // The walk went on to the end: the next invocation starts over and reaches the one that failed.
    await host.triggerScheduled({ scheduledTime: new Date(Date.now() + 12 * MINUTE_MS) });
    expect((await statusOf(stuck)).error?.code).toBe("host.not_handed_over");
  });
});
