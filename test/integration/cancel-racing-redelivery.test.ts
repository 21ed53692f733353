import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi, deferred } from "../support/host-api";
import { messageEvent, startTestHost, unhandedRun, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { putAgent } from "../support/scripted-runner";

/**
 * README: POST /v1/runs/{id}/cancel drops a queued run, "including one left queued because its hand-over to the
 * conversation failed" (202 cancelling), and answers 409 "once ended, with the run's status". A redelivery of the
 * run's event, which hands the run over and is decided (here: steered into the active run), races the cancel: the
 * object takes the cancel in turn with its decisions, so it wins or loses whole (never a 202 whose run is then
 * steered, never a 409 naming "created" for a run that is gone). Slow database writes (LocalHost.databaseOutage
 * with delayMs) make each interleaving deterministic.
 */
let host: TestHost;
let steerer: Awaited<ReturnType<typeof startAdHocRunner>>;
const holds = new Map<string, ReturnType<typeof deferred<void>>>();
/** Event ids each busy run pulled with steering.pull, by conversation. */
const pulled = new Map<string, string[]>();
const manifest = [{ name: "default", label: { en_US: "steerer" }, capabilities: { streaming: true, steering: true }, permissions: { events: ["get", "page"] } }];

beforeAll(async () => {
  steerer = await startAdHocRunner({
    name: "cancel-discarded",
    runners: manifest,
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      const conversation = ctx.conversation?.conversation_id;
      if (ctx.input?.text === "hold") {
        await holds.get(conversation)?.promise;
        const answer = await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "steering.pull", { mode: "all" });
        pulled.set(conversation, ((answer.body as any)?.data?.items ?? []).map((item: any) => item.event.event_id));
      }
      w.reply("done");
    },
  });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: steerer.url })).status).toBe(201);
  await putAgent(host, { agent_id: "cancel-discarded", runner_id: steerer.runnerId() });
});
afterAll(async () => {
  for (const h of holds.values()) h.resolve();
  await host?.dispose();
  await steerer?.close();
});

/** A run left `created` by a lost hand-over, and an active run of its conversation that steers (held). */
async function setUp(conversation: string) {
  const eventId = `${conversation}-e`;
  const lost = await unhandedRun(host, conversation, eventId, "quick");
  holds.set(conversation, deferred());
  const busy = await host.postEvent(messageEvent(conversation, "hold"));
  expect(busy.body.disposition).toBe("started");
  await new Promise((r) => setTimeout(r, 200));
  return { eventId, lost, busy: busy.body.run_id! };
}

describe("cancel of a run left unhanded while its event's redelivery hands it over", () => {
  it("once answered 202 (run cancelled), the event is not steered into the active run, which never gets the cancelled message", async () => {
    const c = "cancel-then-steer";
    const { eventId, lost, busy } = await setUp(c);
    // The cancel's end write is slow; the redelivery reads the run as not started meanwhile.
    host.databaseOutage({ delayMs: 700, matching: "run cancelled before it reached its conversation" });
    const cancel = host.admin("POST", `/v1/runs/${lost}/cancel`);
    await new Promise((r) => setTimeout(r, 200));
    // The steering claim's write is slower still: it lands after the cancel.
    host.databaseOutage({ delayMs: 1500, matching: "absorbed_into_active_run" });
    const redelivered = await host.postEvent(messageEvent(c, "quick", { event_id: eventId }));
    const cancelled = await cancel;
    holds.get(c)!.resolve();
    await host.waitForRun(busy);

    const outcome = {
      cancel: cancelled.status,
      run: (await host.admin("GET", `/v1/runs/${lost}`)).body.status,
      eventDisposition: (await host.admin("GET", `/v1/events/${eventId}`)).body.disposition,
      redeliveryNamesActiveRun: redelivered.body.run_id === busy,
      pulledByActiveRun: (pulled.get(c) ?? []).includes(eventId),
    };
    expect(outcome).toEqual({ cancel: 202, run: "cancelled", eventDisposition: "bound", redeliveryNamesActiveRun: false, pulledByActiveRun: false });
  });

  it("a cancel arriving while the redelivery steers the run away is not answered 409 'already ended (created)'", async () => {
    const c = "steer-then-cancel";
    const { eventId, lost, busy } = await setUp(c);
    // The steering claim's write is slow: the cancel reaches the object while that decision is pending.
    host.databaseOutage({ delayMs: 1000, matching: "absorbed_into_active_run" });
    const redelivery = host.postEvent(messageEvent(c, "quick", { event_id: eventId }));
    await new Promise((r) => setTimeout(r, 300));
    const cancel = await host.admin("POST", `/v1/runs/${lost}/cancel`);
    expect((await redelivery).body).toMatchObject({ disposition: "duplicate", run_id: busy });
    holds.get(c)!.resolve();
    // The active run calls steering.pull once released: let it end before the host can be disposed under it.
    await host.waitForRun(busy);
    // The run was discarded (its event steered): 404 as GET answers, or a 409 naming a status that is an end.
    expect((await host.admin("GET", `/v1/runs/${lost}`)).status).toBe(404);
    const named = { status: cancel.status, runStatus: cancel.body.status, message: cancel.body.error?.message?.replace(/run_\S+/, "run_…") };
    expect(named.status === 404 || (named.status === 409 && ["completed", "failed", "cancelled", "timeout"].includes(named.runStatus)), JSON.stringify(named)).toBe(true);
  });

});
