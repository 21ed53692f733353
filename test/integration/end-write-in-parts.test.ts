/**
 * A run's end holding more ledger rows than one write takes (LEDGER_ROWS_PER_WRITE, 2,048) is written in parts, its
 * leading ledger rows first, so one run's flood does not hold the database's single writer for the length of ~10k
 * rows. Its last part (the rest, the answer and the end) refused once is tried again alone: the parts already written
 * are not written twice, and the run ends completed with every entry once, in order. Refused for good, the run ends
 * as the host failing to record it, and the parts written before reach its followers as a replay gives them. (Guards
 * of the split, which measurements motivated: not failing-first tests.)
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, readSse, startTestHost, type TestHost } from "../support/host";
import { deferred } from "../support/host-api";
import { startAdHocRunner } from "../support/runner";

const TELEMETRY = 3_000;
const REPLY = "probe-end-in-parts-reply";
/** A run whose input names a gate waits for it before its burst: a follower is connected by then. */
const gates = new Map<string, ReturnType<typeof deferred<void>>>();
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "end-in-parts",
    async onRun({ body }, res) {
      const runId = body.context.run_id;
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      await gates.get(body.context.input.text)?.promise;
      // One write: the whole burst is held and goes with the run's end.
      const lines = Array.from({ length: TELEMETRY }, (_, i) => JSON.stringify({ run_id: runId, type: "tool.call.started", data: { tool_call_id: `c${i}`, tool_name: "t", parameters: {} } }));
      lines.push(JSON.stringify({ run_id: runId, type: "message.completed", data: { message: { role: "assistant", content: REPLY } } }));
      lines.push(JSON.stringify({ run_id: runId, type: "run.completed", data: { finish_reason: "stop" } }));
      res.end(lines.join("\n") + "\n");
    },
  });
  host = await startTestHost();
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "end-in-parts" });
});
afterAll(async () => {
  for (const gate of gates.values()) gate.resolve();
  host?.databaseOutage(false);
  await host?.dispose();
  await runner?.close();
});

describe("a run's end written in parts", () => {
  it("tries a refused last part again alone, every entry written once and in order", async () => {
    // Only the last part carries the answer: refused once, then answered.
    host.databaseOutage({ queries: 1, matching: REPLY });
    const posted = await host.postEvent(messageEvent("end-in-parts", "go"));
    const run = await host.waitForRun(posted.body.run_id!);
    expect([run.status, run.message?.content]).toEqual(["completed", REPLY]);
    const rows = await host.query<{ seq: number; type: string }>("SELECT seq, type FROM run_event WHERE run_id = ? ORDER BY seq", [run.run_id]);
    expect(rows).toHaveLength(TELEMETRY + 2);
    expect(rows.map((r) => r.seq)).toEqual(Array.from({ length: TELEMETRY + 2 }, (_, i) => rows[0].seq + i));
    expect(rows.slice(-2).map((r) => r.type)).toEqual(["message.completed", "run.completed"]);
    const items = await host.query<{ role: string; content: string }>("SELECT role, content FROM transcript WHERE conversation_id = 'end-in-parts' ORDER BY seq");
    expect(items).toEqual([{ role: "user", content: "go" }, { role: "assistant", content: REPLY }]);
  });

  it("refused for good, ends the run as a host failure, its followers given the parts written before as a replay gives them", async () => {
    gates.set("held", deferred());
    const posted = await host.postEvent(messageEvent("end-in-parts-refused", "held"));
    const runId = posted.body.run_id!;
    const stream = fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` } });
    await new Promise((r) => setTimeout(r, 300));
    // The last part's first try and its three retries.
    host.databaseOutage({ queries: 4, matching: REPLY });
    gates.get("held")!.resolve();
    const live = await readSse(await stream);
    const run = await host.waitForRun(runId);
    expect([run.status, run.error?.code]).toEqual(["failed", "host.internal_error"]);
    const replay = await readSse(await fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` } }));
    // The first 2,048 telemetry entries were written apart; the rest, the answer and the end never were.
    expect(replay.frames.filter((f) => f.type === "tool.call.started")).toHaveLength(2048);
    expect(live.frames.map((f) => f.seq)).toEqual(replay.frames.map((f) => f.seq));
    expect(live.end).toBe("failed");
  }, 20_000);
});
