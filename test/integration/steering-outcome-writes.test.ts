import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi, deferred } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { putAgent } from "../support/scripted-runner";

/**
 * steering.pull takes items off the queue and records `steering.injected`; when that write is applied but gets no
 * answer in time, the items are put back as if it had been refused, and taken again: the outcome record is written
 * once (its id is the claim's), whether the run pulls the item again or drops it at its end. A pull that is not
 * retried never gave the runner its items: dropped at the run's end, the record says dropped, not injected.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const release = deferred<void>();
const releaseNoPull = deferred<void>();
const releaseOnePull = deferred<void>();
const onePull: { status: number; items: string[] }[] = [];
const releaseConcurrent = deferred<void>();
const concurrentPulls: { status: number; items: string[] }[] = [];
let started = 0;
const pulls: { status: number; items: string[] }[] = [];
const manifest = [{ name: "default", label: { en_US: "steerer" }, capabilities: { streaming: true, steering: true }, permissions: { events: ["get", "page"] } }];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "late-steer",
    runners: manifest,
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      started++;
      if (ctx.input.text === "hold, never pull") {
        await releaseNoPull.promise;
        return w.reply("done without pulling");
      }
      if (ctx.input.text === "hold, pull twice at once") {
        await releaseConcurrent.promise;
        const pull = async () => {
          const r = await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "steering.pull", { mode: "one-at-a-time" });
          const answer = { status: r.status, items: (r.body.data?.items ?? []).map((i: any) => i.event.event_id) };
          concurrentPulls.push(answer);
          return answer;
        };
        // Two pulls at once (a runner's parallel turns): the second starts while the first's record is being written.
        const first = pull();
        await sleep(300);
        await Promise.all([first, pull()]);
        // Then one after another until the queue is empty, as a runner retrying its failed pull would.
        for (let i = 0; i < 4 && (await pull()).items.length > 0; i++);
        return w.reply("done pulling");
      }
      if (ctx.input.text === "hold, pull once") {
        await releaseOnePull.promise;
        const r = await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "steering.pull", { mode: "all" });
        onePull.push({ status: r.status, items: (r.body.data?.items ?? []).map((i: any) => i.event.event_id) });
        // No retry: the held write lands meanwhile, then the run ends.
        await sleep(2_000);
        return w.reply("done after one pull");
      }
      await release.promise;
      // A runner retries a retryable 500, as §8 invites it to.
      for (let attempt = 0; attempt < 3; attempt++) {
        const r = await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "steering.pull", { mode: "all" });
        pulls.push({ status: r.status, items: (r.body.data?.items ?? []).map((i: any) => i.event.event_id) });
        if (r.status === 200) break;
      }
      w.reply("done");
    },
  });
  host = await startTestHost({ vars: { DB_QUERY_TIMEOUT_MS: "1500" } });
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
});
afterAll(async () => {
  release.resolve();
  releaseNoPull.resolve();
  releaseOnePull.resolve();
  releaseConcurrent.resolve();
  await host?.dispose();
  await runner?.close();
});

/** A run of its own agent in conversation `c`, holding (by its text) until released; answers once its runner has it. */
async function heldRun(c: string, text: string) {
  await putAgent(host, { agent_id: `agent-${c}`, runner_id: runner.runnerId(), scope: { type: "conversation", id: c } });
  const before = started;
  const first = await host.postEvent(messageEvent(c, text));
  const until = Date.now() + 10_000;
  while (started === before && Date.now() < until) await sleep(10);
  return first;
}

/** The conversation's steering outcomes, in order, as `type:source_event_id`. */
async function outcomesOf(c: string) {
  const records = await host.query<{ event_type: string; data_json: string }>(
    "SELECT event_type, data_json FROM event_log WHERE event_type IN ('steering.injected', 'steering.dropped') AND conversation_id = ? ORDER BY seq",
    [c],
  );
  return records.map((r) => `${r.event_type}:${JSON.parse(r.data_json).source_event_id}`);
}

describe("a steering.pull whose steering.injected write is applied but unanswered", () => {
  it("records the message as injected once (and never also as dropped)", async () => {
    const c = "late-pull-unanswered";
    const first = await heldRun(c, "hold");
    const steered = await host.postEvent(messageEvent(c, "also this", { event_id: "late-steered-1" }));
    expect(steered.body.disposition).toBe("steered");

    // The pull's record is held past the Worker's 1.5 s timeout, then applied.
    host.databaseOutage({ delayMs: 2_500, matching: "steering.injected" });
    release.resolve();
    const run = await host.waitForRun(first.body.run_id!, 20_000);
    await sleep(3_000);
    const outcomes = await outcomesOf(c);
    expect({ status: run.status, pulls, outcomes }).toEqual({
      status: "completed",
      pulls: expect.anything(),
      outcomes: ["steering.injected:late-steered-1"],
    });
  }, 30_000);
});

describe("a run ending with an unpulled claim whose steering.dropped write is applied but unanswered", () => {
  it("records the message as dropped once", async () => {
    const c = "late-drop-unanswered";
    const first = await heldRun(c, "hold, never pull");
    const steered = await host.postEvent(messageEvent(c, "this one is never pulled", { event_id: "late-steered-2" }));
    expect(steered.body.disposition).toBe("steered");

    // The end's drop record is held past the Worker's 1.5 s timeout, then applied.
    host.databaseOutage({ delayMs: 2_500, matching: "steering.dropped" });
    releaseNoPull.resolve();
    const run = await host.waitForRun(first.body.run_id!, 20_000);
    // The held write lands 2.5 s after it was sent; its retry (the alarm's, at once, or a DB_RETRY_PAUSE_MS later) comes before.
    await sleep(4_000);
    const outcomes = await outcomesOf(c);
    expect({ status: run.status, outcomes }).toEqual({ status: "completed", outcomes: ["steering.dropped:late-steered-2"] });
  }, 30_000);
});

describe("a pull not retried after its steering.injected write was applied unanswered", () => {
  it("records the message the runner never received as dropped, not injected", async () => {
    const c = "late-pull-not-retried";
    const first = await heldRun(c, "hold, pull once");
    const steered = await host.postEvent(messageEvent(c, "also this", { event_id: "late-steered-3" }));
    expect(steered.body.disposition).toBe("steered");

    host.databaseOutage({ delayMs: 2_500, matching: "steering.injected" });
    releaseOnePull.resolve();
    const run = await host.waitForRun(first.body.run_id!, 20_000);
    await sleep(2_000);
    const outcomes = await outcomesOf(c);
    expect({ status: run.status, onePull, outcomes }).toEqual({ status: "completed", onePull: [{ status: 500, items: [] }], outcomes: ["steering.dropped:late-steered-3"] });
  }, 30_000);
});

describe("two steering.pull calls of one run at once, the first one's steering.injected write refused", () => {
  it("the run still gets its messages in claim order, each once", async () => {
    const c = "concurrent-pulls";
    const first = await heldRun(c, "hold, pull twice at once");
    for (const id of ["conc-first", "conc-second"]) expect((await host.postEvent(messageEvent(c, id, { event_id: id }))).body.disposition).toBe("steered");

    // The first pull's record is held 1 s, then refused (nothing applied): its item goes back to the queue.
    host.databaseOutage({ delayMs: 1_000, matching: "steering.injected" });
    host.databaseOutage({ queries: 1, matching: "conc-first" });
    releaseConcurrent.resolve();
    const run = await host.waitForRun(first.body.run_id!, 20_000);
    const received = concurrentPulls.flatMap((p) => p.items);
    const outcomes = await outcomesOf(c);
    expect({ status: run.status, failed: concurrentPulls.filter((p) => p.status !== 200).length, received }).toEqual({ status: "completed", failed: 1, received: ["conc-first", "conc-second"] });
    expect(outcomes).toEqual(["steering.injected:conc-first", "steering.injected:conc-second"]);
  }, 30_000);
});
