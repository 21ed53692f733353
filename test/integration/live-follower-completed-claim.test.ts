import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi, deferred } from "../support/host-api";
import { messageEvent, readSse, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { putAgent } from "../support/scripted-runner";

/**
 * README (GET /v1/runs/{id}/stream): a run "not yet handed to its conversation, is followed until it is; one
 * discarded because its event was steered or rejected instead ends with `steered` / `rejected`". A steering claim
 * whose write got no answer (and did not commit) leaves the event's own run `created`: a follower waits on it in the
 * conversation's LiveHub. When the claim is completed later (the event sent again, or the cron's sweep), the run is
 * discarded (its row deleted), so its follower must hear `steered` -- and leave the hub -- rather than hang.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const holds = [deferred<void>(), deferred<void>()];
let started = 0;
const auth = () => ({ authorization: `Bearer ${host.adminToken}` });

const manifest = [{ name: "default", label: { en_US: "steerer" }, capabilities: { streaming: true, steering: true }, permissions: { events: ["get", "page"] } }];

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "follow-claim",
    runners: manifest,
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      const n = started++;
      await holds[Math.min(n, 1)].promise;
      await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "steering.pull", { mode: "all" }).catch(() => undefined);
      w.reply("done");
    },
  });
  host = await startTestHost({ vars: { DB_QUERY_TIMEOUT_MS: "2000" } });
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
});
afterAll(async () => {
  for (const h of holds) h.resolve();
  await host?.dispose();
  await runner?.close();
});

async function within<T>(ms: number, p: Promise<T>): Promise<T | "still open"> {
  return Promise.race([p, new Promise<"still open">((r) => setTimeout(() => r("still open"), ms))]);
}

/** A busy steering run and an event whose claim into it went unanswered and did not commit: its own run id, left `created`. */
async function unsettledClaim(c: string, eventId: string, startedBefore: number): Promise<{ busy: string; own: string }> {
  await putAgent(host, { agent_id: `agent-${c}`, runner_id: runner.runnerId(), scope: { type: "conversation", id: c } });
  const busy = await host.postEvent(messageEvent(c, "hold"));
  expect(busy.body.disposition).toBe("started");
  const end = Date.now() + 10_000;
  while (started === startedBefore && Date.now() < end) await new Promise((r) => setTimeout(r, 10));
  // Held past the Worker's 2 s timeout, then refused: unanswered, and not applied.
  host.databaseOutage({ delayMs: 3_000, matching: "absorbed_into_active_run" });
  host.databaseOutage({ queries: 1, matching: "absorbed_into_active_run" });
  const claimed = await host.postEvent(messageEvent(c, "and this", { event_id: eventId }));
  expect(claimed.status).toBe(500);
  await new Promise((r) => setTimeout(r, 1_500));
  const own = (await host.query<{ run_id: string }>("SELECT run_id FROM event_log WHERE event_id = ?", [eventId]))[0].run_id;
  expect((await host.admin("GET", `/v1/runs/${own}`)).body.status).toBe("created");
  return { busy: busy.body.run_id!, own };
}

describe("a follower of a run whose event's unanswered steering claim is completed later", () => {
  it("hears `steered` when the event sent again completes the claim", async () => {
    const { busy, own } = await unsettledClaim("follow-claim-redelivered", "follow-claim-redelivered-2", started);
    const controller = new AbortController();
    const res = await fetch(`${host.url}/v1/runs/${own}/stream`, { headers: auth(), signal: controller.signal });
    expect(res.status).toBe(200);
    const followed = readSse(res).catch(() => ({ frames: [], end: "aborted" }));
    await new Promise((r) => setTimeout(r, 300));

    const again = await host.postEvent(messageEvent("follow-claim-redelivered", "and this", { event_id: "follow-claim-redelivered-2" }));
    expect(again.body).toMatchObject({ disposition: "duplicate", run_id: busy });
    expect((await host.admin("GET", `/v1/runs/${own}`)).status).toBe(404);

    const outcome = await within(5_000, followed);
    controller.abort();
    holds[0].resolve();
    await host.waitForRun(busy);
    expect(outcome).toEqual({ frames: [], end: "steered" });
  });

  it("hears `steered` when the cron's sweep completes the claim", async () => {
    const { busy, own } = await unsettledClaim("follow-claim-swept", "follow-claim-swept-2", started);
    const controller = new AbortController();
    const res = await fetch(`${host.url}/v1/runs/${own}/stream`, { headers: auth(), signal: controller.signal });
    expect(res.status).toBe(200);
    const followed = readSse(res).catch(() => ({ frames: [], end: "aborted" }));
    await new Promise((r) => setTimeout(r, 300));

    await host.triggerScheduled({ scheduledTime: new Date(Date.now() + 11 * 60_000) });
    expect((await host.admin("GET", "/v1/events/follow-claim-swept-2")).body).toMatchObject({ disposition: "steered", run_id: busy });
    expect((await host.admin("GET", `/v1/runs/${own}`)).status).toBe(404);

    const outcome = await within(5_000, followed);
    controller.abort();
    holds[1].resolve();
    await host.waitForRun(busy);
    expect(outcome).toEqual({ frames: [], end: "steered" });
  });
});
