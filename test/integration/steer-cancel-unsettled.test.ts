import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi, deferred } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { putAgent } from "../support/scripted-runner";

/**
 * A steering claim whose write got no answer (and did not commit): ingress answered 500, the event's own run is left
 * `created` (README: cancel drops "one left queued because its hand-over to the conversation failed"). An operator
 * cancels that run: 202 `cancelling`, and the run ends `cancelled`, yet the message is still pulled by the steering run and the
 * event later recorded as steered into it. The claim must be settled one way: a cancel that finds it completes it
 * (the run discarded: 404, as README says of a run whose event was steered), as the cron's sweep does.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const release = deferred<void>();
let started = 0;
const pulled: string[] = [];
const manifest = [{ name: "default", label: { en_US: "steerer" }, capabilities: { streaming: true, steering: true } }];

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "steerer",
    runners: manifest,
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      started++;
      await release.promise;
      const r = await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "steering.pull", { mode: "all" });
      pulled.push(...(r.body.data?.items ?? []).map((i: any) => i.event.event_id));
      w.reply("done");
    },
  });
  host = await startTestHost({ vars: { DB_QUERY_TIMEOUT_MS: "2000" } });
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
});
afterAll(async () => {
  release.resolve();
  await host?.dispose();
  await runner?.close();
});

describe("cancelling the run of an event whose steering claim went unanswered", () => {
  it("the cancelled message is not pulled by the steering run, nor recorded as steered", async () => {
    const c = "rv-cancel-unsettled";
    await putAgent(host, { agent_id: `agent-${c}`, runner_id: runner.runnerId(), scope: { type: "conversation", id: c } });
    const first = await host.postEvent(messageEvent(c, "hold"));
    const end = Date.now() + 10_000;
    while (started === 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 10));

    // Held past the Worker's 2 s timeout, then refused: unanswered, and not applied.
    host.databaseOutage({ delayMs: 3_000, matching: "absorbed_into_active_run" });
    host.databaseOutage({ queries: 1, matching: "absorbed_into_active_run" });
    const claimed = await host.postEvent(messageEvent(c, "never mind this", { event_id: "rv-cu-2" }));
    expect(claimed.status).toBe(500);
    await new Promise((r) => setTimeout(r, 1_500));
    const ownRun = (await host.query<{ run_id: string }>("SELECT run_id FROM event_log WHERE event_id = 'rv-cu-2'"))[0].run_id;
    expect((await host.admin("GET", `/v1/runs/${ownRun}`)).body.status).toBe("created");

    const cancel = await host.admin("POST", `/v1/runs/${ownRun}/cancel`);
    release.resolve();
    await host.waitForRun(first.body.run_id!);
    const own = await host.admin("GET", `/v1/runs/${ownRun}`);
    const event = await host.admin("GET", "/v1/events/rv-cu-2");
    const outcome = { cancel: cancel.status, own: own.status === 200 ? own.body.status : own.status, pulled, disposition: event.body.disposition, event_run: event.body.run_id };
    // Either the cancel took the message back (its run cancelled, nothing pulled), or the claim stood (the run was
    // discarded: 404, README) and the message was pulled: never a cancelled run whose message was handled anyway.
    expect([
      { cancel: 202, own: "cancelled", pulled: [], disposition: "bound", event_run: ownRun },
      { cancel: 404, own: 404, pulled: ["rv-cu-2"], disposition: "steered", event_run: first.body.run_id },
    ]).toContainEqual(outcome);
  });
});
