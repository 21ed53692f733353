/**
 * A run's end written in parts (more than 2,048 ledger rows held) whose leading part is applied but never answered
 * (the query times out, DB_QUERY_TIMEOUT_MS): the rest is not tried, and the host ends the run itself after the rows
 * that part wrote. Its live followers get those rows before the host's end, as a replay of the ledger gives them.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, readSse, startTestHost, type TestHost } from "../support/host";
import { deferred } from "../support/host-api";
import { startAdHocRunner } from "../support/runner";

const TELEMETRY = 3_000;
/** Named only by the burst's first line: the leading part's write alone carries it. */
const LEAD = "probe-lead-part-unanswered";
const gate = deferred<void>();
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "end-part-unanswered",
    async onRun({ body }, res) {
      const runId = body.context.run_id;
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      await gate.promise;
      // One chunk: the whole burst is held and goes with the run's end.
      const lines = Array.from({ length: TELEMETRY }, (_, i) => JSON.stringify({ run_id: runId, type: "tool.call.started", data: { tool_call_id: `c${i}`, tool_name: i === 0 ? LEAD : "t", parameters: {} } }));
      lines.push(JSON.stringify({ run_id: runId, type: "message.completed", data: { message: { role: "assistant", content: "done" } } }));
      lines.push(JSON.stringify({ run_id: runId, type: "run.completed", data: { finish_reason: "stop" } }));
      res.end(lines.join("\n") + "\n");
    },
  });
  host = await startTestHost({ vars: { DB_QUERY_TIMEOUT_MS: "1000" } });
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "end-part-unanswered" });
});
afterAll(async () => {
  gate.resolve();
  await host?.dispose();
  await runner?.close();
});

describe("a run's end whose leading part is applied unanswered", () => {
  it("gives its live followers the rows that part wrote, then the host's end, as a replay gives them", async () => {
    const posted = await host.postEvent(messageEvent("end-part-unanswered", "go"));
    const runId = posted.body.run_id!;
    const stream = fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` } });
    await new Promise((r) => setTimeout(r, 300));
    host.databaseOutage({ answerDelayMs: 1_500, matching: LEAD, queries: 1 });
    gate.resolve();
    const live = await readSse(await stream);
    const run = await host.waitForRun(runId);
    expect([run.status, run.error?.code]).toEqual(["failed", "host.internal_error"]);
    const replay = await readSse(await fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` } }));
    // The leading part was applied: its 2,048 rows, then the host's end.
    expect(replay.frames.filter((f) => f.type === "tool.call.started")).toHaveLength(2048);
    expect(replay.frames.at(-1)?.type).toBe("run.failed");
    expect(live.frames.map((f) => f.seq)).toEqual(replay.frames.map((f) => f.seq));
    expect(live.end).toBe("failed");
  }, 20_000);
});
