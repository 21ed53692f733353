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
  host = await startTestHost({ captureLogs: true, vars: { DB_QUERY_TIMEOUT_MS: "1000" } });
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
  // A debounce gives the test ample time to cut the database between ingress and the run's start.
  const agent = { agent_id: "outage", name: "outage", runner_id: runner.runnerId(), event_types: ["message.received"], concurrency: { debounce_ms: 1500 } };
  expect((await host.admin("POST", "/v1/admin/agents", agent)).status).toBe(201);
});
afterAll(async () => {
  host?.databaseOutage(false);
  await host?.dispose();
  await runner?.close();
});

/** A run whose start meets the outage: it must not end, and runs once the database is back. */
async function startDuring(mode: true | "hang", conversation: string) {
  const posted = await host.postEvent(messageEvent(conversation, "hello"));
  const runId = posted.body.run_id!;
  const stream = await fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` } });
  const frames = stream.text();
  host.databaseOutage(mode);
  // The start failed, and so did recording the failure (each call refused, or given up after DB_QUERY_TIMEOUT_MS).
  await expect.poll(() => host.logs().includes(`run ${runId}: host failure`), { timeout: 8_000 }).toBe(true);
  host.databaseOutage(false);
  const ended = await frames;
  expect(ended).toContain("event: end");
  expect(ended).toContain('"status":"completed"');
  expect((await host.waitForRun(runId, 15_000)).message?.content).toBe("done: hello");
  expect(runner.calls.filter((c) => c.body.context.run_id === runId)).toHaveLength(1);
}

describe("a database outage while a run starts", () => {
  it("keeps the run and its followers waiting, then runs it once the database is back", () => startDuring(true, "outage-refused"), 25_000);
  it("gives up on a database that does not answer (DB_QUERY_TIMEOUT_MS), and likewise runs it later", () => startDuring("hang", "outage-hang"), 25_000);
});
