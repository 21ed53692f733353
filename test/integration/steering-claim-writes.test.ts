import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi, deferred } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { putAgent } from "../support/scripted-runner";

/**
 * A steering claim's libSQL write that fails. Applied but unanswered in time (a Turso round trip timing out: "may
 * have applied"), the claimed message stays on the run's queue and the event sent again completes that claim, so
 * the run gets it once. Refused, nothing was queued: the run never pulls a claim that is taken back, and the
 * event sent again is claimed once more and pulled once.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const release = deferred<void>();
let started = 0;
const firstPull = deferred<void>();
const secondPull = deferred<void>();
const pulledOnce = deferred<void>();
const third = deferred<void>();
const endNow = deferred<void>();
const endFourth = deferred<void>();

const manifest = [{ name: "default", label: { en_US: "steerer" }, capabilities: { streaming: true, steering: true }, permissions: { events: ["get", "page"] } }];

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "steerer",
    runners: manifest,
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      started++;
      if (ctx.input.text === "hold, then end without pulling") {
        await endNow.promise;
        return w.reply("ended");
      }
      if (ctx.input.text === "hold four, then end without pulling") {
        await endFourth.promise;
        return w.reply("ended");
      }
      if (ctx.input.text === "sent as the run ended" || ctx.input.text === "answer me after all") return w.reply(`ran: ${ctx.input.text}`);
      if (ctx.input.text === "hold twice") {
        const pull = async () => (await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "steering.pull", { mode: "all" })).body.data.items;
        await firstPull.promise;
        const a = await pull();
        pulledOnce.resolve();
        await secondPull.promise;
        const b = await pull();
        return w.reply(JSON.stringify({ pulled: [...a, ...b].map((i: any) => i.event.event_id) }));
      }
      await (ctx.input.text === "hold three" ? third.promise : release.promise);
      const items = (await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "steering.pull", { mode: "all" })).body.data.items;
      w.reply(JSON.stringify({ pulled: items.map((i: any) => i.event.event_id) }));
    },
  });
  host = await startTestHost({ vars: { DB_QUERY_TIMEOUT_MS: "2000" } });
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
});
afterAll(async () => {
  release.resolve();
  third.resolve();
  firstPull.resolve();
  secondPull.resolve();
  endNow.resolve();
  endFourth.resolve();
  await host?.dispose();
  await runner?.close();
});

describe("steering claims whose libSQL write fails", () => {
  it("the claimed message is still pulled by the run, or recorded as dropped, never silently lost", async () => {
    const c = "claim-unanswered";
    await putAgent(host, { agent_id: `agent-${c}`, runner_id: runner.runnerId(), scope: { type: "conversation", id: c } });
    const first = await host.postEvent(messageEvent(c, "hold"));
    expect(first.body.disposition).toBe("started");
    const end = Date.now() + 10_000;
    while (started < 1 && Date.now() < end) await new Promise((r) => setTimeout(r, 10));

    // The claim's batch (the event's `steered` decision) is held past the Worker's 2 s timeout, then applied.
    host.databaseOutage({ delayMs: 3_000, matching: "absorbed_into_active_run" });
    const claimed = await host.postEvent(messageEvent(c, "please also do this", { event_id: "claim-unanswered-2" }));
    await new Promise((r) => setTimeout(r, 1_500));
    // The client (or platform) retries the event, as it would after an error answer.
    const retry = await host.postEvent(messageEvent(c, "please also do this", { event_id: "claim-unanswered-2" }));

    release.resolve();
    const run = await host.waitForRun(first.body.run_id!);
    const pulled: string[] = JSON.parse(run.message!.content as string).pulled;
    const recorded = await host.query<{ event_type: string; metadata_json: string }>(
      "SELECT event_type, metadata_json FROM event_log WHERE event_type IN ('steering.injected', 'steering.dropped') AND conversation_id = ?",
      [c],
    );
    const event = (await host.admin("GET", "/v1/events/claim-unanswered-2")).body;
    const runs = await host.admin("GET", `/v1/runs?conversation_id=${c}`);
    expect(claimed.status).toBe(500);
    expect(retry.body).toMatchObject({ disposition: "duplicate", run_id: first.body.run_id });
    expect(event).toMatchObject({ disposition: "steered", run_id: first.body.run_id });
    // Claimed once, pulled once, recorded once (PROTOCOL §10 / README "Steering"); no run of its own.
    expect(pulled).toEqual(["claim-unanswered-2"]);
    expect(recorded.map((r) => r.event_type)).toEqual(["steering.injected"]);
    expect(runs.body.items).toHaveLength(1);
  });

  it("a claim whose write is refused after the run already pulled the message: the retried event is not delivered to the run a second time", async () => {
    const c = "claim-refused-after-pull";
    await putAgent(host, { agent_id: `agent-${c}`, runner_id: runner.runnerId(), scope: { type: "conversation", id: c } });
    const before = started;
    const first = await host.postEvent(messageEvent(c, "hold twice"));
    expect(first.body.disposition).toBe("started");
    const end = Date.now() + 10_000;
    while (started === before && Date.now() < end) await new Promise((r) => setTimeout(r, 10));

    // The claim's batch is held 1 s (the run pulls meanwhile), then refused (a transient database error: nothing applied).
    host.databaseOutage({ delayMs: 1_000, matching: "absorbed_into_active_run" });
    host.databaseOutage({ queries: 1, matching: "absorbed_into_active_run" });
    const posting = host.postEvent(messageEvent(c, "one more thing", { event_id: "claim-refused-2" }));
    await new Promise((r) => setTimeout(r, 300));
    firstPull.resolve();
    await pulledOnce.promise;
    const answer = await posting;
    // The platform retries the event it got an error for.
    const retry = await host.postEvent(messageEvent(c, "one more thing", { event_id: "claim-refused-2" }));
    secondPull.resolve();
    const run = await host.waitForRun(first.body.run_id!);
    const pulled: string[] = JSON.parse(run.message!.content as string).pulled;
    const injected = await host.query<{ n: number }>("SELECT COUNT(*) AS n FROM event_log WHERE event_type = 'steering.injected' AND run_id = ?", [first.body.run_id!]);
    expect(answer.status).toBe(500);
    expect(retry.body).toMatchObject({ disposition: "duplicate", run_id: first.body.run_id });
    // One event, delivered once (README: "A retried event whose run was already decided ... changes nothing").
    expect(pulled).toEqual(["claim-refused-2"]);
    expect(Number(injected[0].n)).toBe(1);
  });
  it("an unanswered claim that did not commit, its event never sent again: the cron's sweep completes the claim instead of failing the event's run", async () => {
    const c = "claim-unanswered-swept";
    await putAgent(host, { agent_id: `agent-${c}`, runner_id: runner.runnerId(), scope: { type: "conversation", id: c } });
    const before = started;
    const first = await host.postEvent(messageEvent(c, "hold three"));
    const end = Date.now() + 10_000;
    while (started === before && Date.now() < end) await new Promise((r) => setTimeout(r, 10));

    // Held past the Worker's 2 s timeout, then refused: unanswered, and not applied.
    host.databaseOutage({ delayMs: 3_000, matching: "absorbed_into_active_run" });
    host.databaseOutage({ queries: 1, matching: "absorbed_into_active_run" });
    const claimed = await host.postEvent(messageEvent(c, "and this", { event_id: "claim-swept-2" }));
    expect(claimed.status).toBe(500);
    await new Promise((r) => setTimeout(r, 1_500));
    const ownRun = (await host.query<{ run_id: string }>("SELECT run_id FROM event_log WHERE event_id = 'claim-swept-2'"))[0].run_id;
    expect((await host.admin("GET", `/v1/runs/${ownRun}`)).body.status).toBe("created");

    await host.triggerScheduled({ scheduledTime: new Date(Date.now() + 11 * 60_000) });
    expect((await host.admin("GET", "/v1/events/claim-swept-2")).body).toMatchObject({ disposition: "steered", run_id: first.body.run_id });
    expect((await host.admin("GET", `/v1/runs/${ownRun}`)).status).toBe(404);
    third.resolve();
    const run = await host.waitForRun(first.body.run_id!);
    expect(JSON.parse(run.message!.content as string).pulled).toEqual(["claim-swept-2"]);
  });

  it("a claim whose write is answered only once its run has ended: the message is not dropped but decided again, and run", async () => {
    const c = "claim-outlived";
    await putAgent(host, { agent_id: `agent-${c}`, runner_id: runner.runnerId(), scope: { type: "conversation", id: c } });
    const before = started;
    const first = await host.postEvent(messageEvent(c, "hold, then end without pulling"));
    const end = Date.now() + 10_000;
    while (started === before && Date.now() < end) await new Promise((r) => setTimeout(r, 10));

    // The claim's batch is held 1 s (applied then, well within the Worker's timeout); the run ends meanwhile.
    host.databaseOutage({ delayMs: 1_000, matching: "absorbed_into_active_run" });
    const posting = host.postEvent(messageEvent(c, "sent as the run ended", { event_id: "claim-outlived-2" }));
    await new Promise((r) => setTimeout(r, 200));
    endNow.resolve();
    expect((await host.waitForRun(first.body.run_id!)).status).toBe("completed");
    const answer = await posting;

    // Answered as an event that found its run over (README "Steering"): its own run, which runs it.
    expect(answer.status).toBe(202);
    expect(["started", "queued"]).toContain(answer.body.disposition);
    expect(answer.body.run_id).not.toBe(first.body.run_id);
    const own = await host.waitForRun(answer.body.run_id!);
    expect({ status: own.status, message: own.message?.content }).toEqual({ status: "completed", message: "ran: sent as the run ended" });
    expect((await host.admin("GET", "/v1/events/claim-outlived-2")).body).toMatchObject({ disposition: "bound", run_id: answer.body.run_id });
    const outcomes = await host.query("SELECT event_type FROM event_log WHERE event_type IN ('steering.injected', 'steering.dropped') AND conversation_id = ?", [c]);
    expect(outcomes).toEqual([]);
  });

  it("an unanswered claim that committed, its run ending without pulling it: the message is decided anew and run, however the drop's completion of the claim and the new decision meet", async () => {
    const c = "claim-unanswered-dropped";
    await putAgent(host, { agent_id: `agent-${c}`, runner_id: runner.runnerId(), scope: { type: "conversation", id: c } });
    const before = started;
    const first = await host.postEvent(messageEvent(c, "hold four, then end without pulling"));
    const end = Date.now() + 10_000;
    while (started === before && Date.now() < end) await new Promise((r) => setTimeout(r, 10));

    // The claim's batch is held past the Worker's 2 s timeout, then applied: unanswered, and the event never sent again.
    host.databaseOutage({ delayMs: 3_000, matching: "absorbed_into_active_run" });
    expect((await host.postEvent(messageEvent(c, "answer me after all", { event_id: "claim-dropped-2" }))).status).toBe(500);
    await new Promise((r) => setTimeout(r, 1_500));
    expect((await host.admin("GET", "/v1/events/claim-dropped-2")).body).toMatchObject({ disposition: "steered", run_id: first.body.run_id });
    // The run ends without pulling it; the drop's completion of that claim is slow (the database's answer held 1 s).
    host.databaseOutage({ delayMs: 1_000, matching: "absorbed_into_active_run" });
    endFourth.resolve();
    expect((await host.waitForRun(first.body.run_id!)).status).toBe("completed");

    const start = Date.now();
    let event = (await host.admin("GET", "/v1/events/claim-dropped-2")).body;
    while (event.disposition !== "bound" && Date.now() - start < 10_000) {
      await new Promise((r) => setTimeout(r, 100));
      event = (await host.admin("GET", "/v1/events/claim-dropped-2")).body;
    }
    expect(event.disposition).toBe("bound");
    expect((await host.waitForRun(event.run_id)).message?.content).toBe("ran: answer me after all");
  }, 30_000);
});
