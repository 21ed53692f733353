/**
 * Only results that bring rows of other tables keep a flood from being written in parts (ledger-writes.ts): one the
 * host dropped (an artifact.created naming no content, a blank message) brings none, so a runner sending one ahead of
 * each burst still has its burst written 2,048 ledger rows at a time, not as one write holding the database's writer.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, readSse, startTestHost, type TestHost } from "../support/host";
import { startAdHocRunner } from "../support/runner";

const TELEMETRY = 3_000;
/** Named only by the burst's last telemetry line: past the first 2,048 rows, so in the write of the rest. */
const TAIL = "probe-dropped-head-tail";
const HEADS: Record<string, { type: string; data: unknown }> = {
  artifact: { type: "artifact.created", data: { artifact_type: "file" } },
  message: { type: "message.completed", data: { message: { role: "assistant", content: " " } } },
};
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "end-parts-dropped-head",
    async onRun({ body }, res) {
      const runId = body.context.run_id;
      const head = HEADS[body.context.input.text];
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      // One chunk: the dropped result, then the burst, all held and written with the run's end.
      const lines = [JSON.stringify({ run_id: runId, ...head })];
      for (let i = 0; i < TELEMETRY; i++) lines.push(JSON.stringify({ run_id: runId, type: "tool.call.started", data: { tool_call_id: `c${i}`, tool_name: i === TELEMETRY - 1 ? TAIL : "t", parameters: {} } }));
      lines.push(JSON.stringify({ run_id: runId, type: "run.completed", data: { finish_reason: "stop" } }));
      res.end(lines.join("\n") + "\n");
    },
  });
  host = await startTestHost();
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "end-parts-dropped-head" });
});
afterAll(async () => {
  host?.databaseOutage(false);
  await host?.dispose();
  await runner?.close();
});

describe("a flood behind a result the host dropped", () => {
  for (const head of Object.keys(HEADS)) {
    it(`is still written in parts (a dropped ${HEADS[head].type} first)`, async () => {
      // The write holding the burst's tail, refused for good (its first try and three retries): what was written apart stays.
      host.databaseOutage({ queries: 4, matching: TAIL });
      const posted = await host.postEvent(messageEvent(`dropped-head-${head}`, head));
      const run = await host.waitForRun(posted.body.run_id!);
      expect([run.status, run.error?.code]).toEqual(["failed", "host.internal_error"]);
      const replay = await readSse(await fetch(`${host.url}/v1/runs/${run.run_id}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` } }));
      // The first part: the dropped result, the warning naming it, and telemetry, 2,048 rows; then the host's end.
      expect(replay.frames.slice(0, 2).map((f) => [f.type, f.origin])).toEqual([[HEADS[head].type, "runner"], ["host.warning", "host"]]);
      expect(replay.frames.slice(0, -1)).toHaveLength(2048);
      expect(replay.frames.at(-1)?.type).toBe("run.failed");
    }, 20_000);
  }
});
