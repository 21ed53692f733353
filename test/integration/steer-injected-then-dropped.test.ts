import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi, deferred } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { putAgent } from "../support/scripted-runner";

/**
 * A steering.pull whose `steering.injected` write is applied but unanswered: the pull answers 500, the runner never
 * gets the message, and the item is put back. If the run then ends without pulling again, the message was dropped:
 * EventLog must not say it was injected into the run.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const release = deferred<void>();
let started = 0;
const pulls: { status: number; items: string[] }[] = [];
const manifest = [{ name: "default", label: { en_US: "steerer" }, capabilities: { streaming: true, steering: true }, permissions: { events: ["get", "page"] } }];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "one-pull",
    runners: manifest,
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      started++;
      await release.promise;
      const r = await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "steering.pull", { mode: "all" });
      pulls.push({ status: r.status, items: (r.body.data?.items ?? []).map((i: any) => i.event.event_id) });
      // No retry: let the held write land, then finish.
      await sleep(2_000);
      w.reply("done");
    },
  });
  host = await startTestHost({ vars: { DB_QUERY_TIMEOUT_MS: "1500" } });
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
});
afterAll(async () => {
  release.resolve();
  await host?.dispose();
  await runner?.close();
});

describe("a pull that failed after its injected record was applied", () => {
  it("a message the runner never received is recorded as dropped, not injected", async () => {
    const c = "rv-inj-drop";
    await putAgent(host, { agent_id: `agent-${c}`, runner_id: runner.runnerId(), scope: { type: "conversation", id: c } });
    const first = await host.postEvent(messageEvent(c, "hold"));
    const until = Date.now() + 10_000;
    while (started < 1 && Date.now() < until) await sleep(10);
    const steered = await host.postEvent(messageEvent(c, "also this", { event_id: "rv-inj-drop-1" }));
    expect(steered.body.disposition).toBe("steered");

    host.databaseOutage({ delayMs: 2_500, matching: "steering.injected" });
    release.resolve();
    const run = await host.waitForRun(first.body.run_id!, 20_000);
    await sleep(2_000);
    const records = await host.query<{ event_type: string; data_json: string }>(
      "SELECT event_type, data_json FROM event_log WHERE event_type IN ('steering.injected', 'steering.dropped') AND conversation_id = ? ORDER BY seq",
      [c],
    );
    const outcomes = records.map((r) => `${r.event_type}:${JSON.parse(r.data_json).source_event_id}`);
    expect({ status: run.status, pulls, outcomes }).toEqual({
      status: "completed",
      pulls: [{ status: 500, items: [] }],
      outcomes: ["steering.dropped:rv-inj-drop-1"],
    });
  }, 30_000);
});
