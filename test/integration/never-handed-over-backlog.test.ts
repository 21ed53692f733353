import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { messageEvent, startTestHost, unhandedRun, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { putAgent } from "../support/scripted-runner";

/**
 * The never-handed-over sweep looks at RETENTION_BATCH_SIZE x RETENTION_MAX_BATCHES not-started runs per
 * invocation, oldest first, from where the last invocation stopped. Runs their conversation holds (waiting their
 * turn) stay not-started: however many wait, a lost run behind them is reached by a later invocation.
 */
const MINUTE_MS = 60_000;
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const release = deferred<void>();

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "backlog",
    async onRun({ body }, res) {
      const w = resultWriter(res, body.context.run_id);
      if (body.context.input.text === "busy") await release.promise;
      w.reply(`re: ${body.context.input.text}`);
    },
  });
  host = await startTestHost({ vars: { RETENTION_BATCH_SIZE: "1", RETENTION_MAX_BATCHES: "2" } });
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
});
afterAll(async () => {
  release.resolve();
  await host?.dispose();
  await runner?.close();
});

describe("never-handed-over sweep behind runs that wait their turn", () => {
  it("reaches a lost run within a few invocations", async () => {
    const busyConv = "backlog-busy";
    await putAgent(host, { agent_id: `agent-${busyConv}`, runner_id: runner.runnerId(), scope: { type: "conversation", id: busyConv }, concurrency: { strategy: "enqueue" } });
    const busy = await host.postEvent(messageEvent(busyConv, "busy"));
    expect(busy.body.disposition).toBe("started");
    for (const text of ["w1", "w2"]) expect((await host.postEvent(messageEvent(busyConv, text))).body.disposition).toBe("queued");

    const lostConv = "backlog-lost";
    await putAgent(host, { agent_id: `agent-${lostConv}`, runner_id: runner.runnerId(), scope: { type: "conversation", id: lostConv } });
    const lost = await unhandedRun(host, lostConv, "evt-backlog-lost");

    // One invocation looks at the two held runs only; the next goes on from there.
    await host.triggerScheduled({ scheduledTime: new Date(Date.now() + 30 * MINUTE_MS) });
    expect((await host.admin("GET", `/v1/runs/${lost}`)).body.status).toBe("created");
    await host.triggerScheduled({ scheduledTime: new Date(Date.now() + 30 * MINUTE_MS) });
    const view = (await host.admin("GET", `/v1/runs/${lost}`)).body;
    expect({ status: view.status, code: view.error?.code }).toEqual({ status: "failed", code: "host.not_handed_over" });
    // The walk reached the end: the next starts over, and the held runs are still held.
    await host.triggerScheduled({ scheduledTime: new Date(Date.now() + 30 * MINUTE_MS) });
    const held = await host.query<{ status: string }>("SELECT status FROM run WHERE conversation_id = ? ORDER BY created_at", [busyConv]);
    expect(held.map((r) => r.status)).toEqual(["running", "created", "created"]);
    release.resolve();
  });
});
