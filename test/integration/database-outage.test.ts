import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * The database goes away while a run starts (`databaseOutage`: every query
 * fails as an unreachable libSQL would). The run can neither start nor record
 * that it failed, so it is not over: it is tried again after a pause, and its
 * followers see how it really ends.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "outage",
    async onRun({ body }, res) {
      resultWriter(res, body.context.run_id).reply(`done: ${body.context.input.text}`);
    },
  });
  host = await startTestHost({ captureLogs: true });
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
  // A debounce gives the test time to cut the database between ingress and the run's start.
  const agent = { agent_id: "outage", name: "outage", runner_id: runner.runnerId(), event_types: ["message.received"], concurrency: { debounce_ms: 300 } };
  expect((await host.admin("POST", "/v1/admin/agents", agent)).status).toBe(201);
});
afterAll(async () => {
  host?.databaseOutage(false);
  await host?.dispose();
  await runner?.close();
});

describe("a database outage while a run starts", () => {
  it("keeps the run and its followers waiting, then runs it once the database is back", async () => {
    const posted = await host.postEvent(messageEvent("outage", "hello"));
    const runId = posted.body.run_id!;
    const stream = await fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` } });
    const frames = stream.text();
    host.databaseOutage(true);
    // The start failed, and so did recording the failure.
    await expect.poll(() => host.logs().includes(`run ${runId}: host failure`), { timeout: 5_000 }).toBe(true);
    host.databaseOutage(false);
    const ended = await frames;
    expect(ended).toContain("event: end");
    expect(ended).toContain('"status":"completed"');
    expect((await host.waitForRun(runId, 15_000)).message?.content).toBe("done: hello");
    expect(runner.calls.filter((c) => c.body.context.run_id === runId)).toHaveLength(1);
  }, 20_000);
});
