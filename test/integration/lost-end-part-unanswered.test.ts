/**
 * A run's end written in parts whose leading part is applied but never answered (DB_QUERY_TIMEOUT_MS), and whose
 * host end cannot be written either (the database goes away): the run is left running and later ended as lost. Its
 * live followers, kept meanwhile, get the rows that part wrote before the host's end, as a replay gives them.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, readSse, startTestHost, type TestHost } from "../support/host";
import { deferred } from "../support/host-api";
import { startAdHocRunner } from "../support/runner";

const TELEMETRY = 3_000;
/** Named only by the burst's first line: the leading part's write alone carries it. */
const LEAD = "probe-lost-lead-part";
const gate = deferred<void>();
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "lost-end-part",
    async onRun({ body }, res) {
      const runId = body.context.run_id;
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      await gate.promise;
      // One chunk: the whole burst is held and goes with the run's end.
      const lines = Array.from({ length: TELEMETRY }, (_, i) => JSON.stringify({ run_id: runId, type: "tool.call.started", data: { tool_call_id: `c${i}`, tool_name: i === 0 ? LEAD : "t", parameters: {} } }));
      lines.push(JSON.stringify({ run_id: runId, type: "run.completed", data: { finish_reason: "stop" } }));
      res.end(lines.join("\n") + "\n");
    },
  });
  host = await startTestHost({ captureLogs: true, vars: { DB_QUERY_TIMEOUT_MS: "1000" } });
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "lost-end-part" });
});
afterAll(async () => {
  gate.resolve();
  host?.databaseOutage(false);
  await host?.dispose();
  await runner?.close();
});

describe("a run whose end's leading part is applied unanswered and whose host end fails too", () => {
  it("gives its live followers the rows that part wrote, then the end as lost, as a replay gives them", async () => {
    const posted = await host.postEvent(messageEvent("lost-end-part", "go"));
    const runId = posted.body.run_id!;
    const stream = fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` } });
    await new Promise((r) => setTimeout(r, 300));
    host.databaseOutage({ answerDelayMs: 5_000, matching: LEAD, queries: 1 });
    gate.resolve();
    // The leading part is applied (its answer held): the database goes away before the Worker gives up on it.
    await expect.poll(async () => (await host.query("SELECT 1 FROM run_event WHERE run_id = ? AND type = 'tool.call.started' LIMIT 1", [runId])).length, { interval: 20 }).toBe(1);
    host.databaseOutage(true);
    await expect.poll(() => host.logs().includes(`run ${runId}: failure not recorded`), { timeout: 8_000 }).toBe(true);
    host.databaseOutage(false);
    const live = await readSse(await stream);
    const run = await host.waitForRun(runId, 20_000);
    expect([run.status, run.error?.code]).toEqual(["failed", "host.session_lost"]);
    const replay = await readSse(await fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` } }));
    expect(replay.frames.filter((f) => f.type === "tool.call.started")).toHaveLength(2048);
    expect(replay.frames.at(-1)?.type).toBe("run.failed");
    expect(live.frames.map((f) => f.seq)).toEqual(replay.frames.map((f) => f.seq));
    expect(live.end).toBe("failed");
  }, 40_000);
});
