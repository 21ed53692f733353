/**
 * A batch of more than 2,048 ledger rows written mid-run in parts (ledger-writes.ts) whose leading part gets no answer
 * (DB_QUERY_TIMEOUT_MS): the write of the rest, which holds the batch's artifact rows, is never made. An inline
 * artifact of that batch was stored in R2 but has no row; the run's end must not name it (its transcript item of
 * trailing artifacts would point at an artifact no one can read), and its blob, named by nothing, goes.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { startAdHocRunner } from "../support/runner";

const TELEMETRY = 2_100;
/** Named only by the burst's first line: the leading part's write alone carries it. */
const LEAD = "probe-lead-mid-run-unanswered";
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "mid-run-part-unanswered",
    async onRun({ body }, res) {
      const runId = body.context.run_id;
      const line = (type: string, data: unknown) => JSON.stringify({ run_id: runId, type, data }) + "\n";
      const telemetry = (i: number) => line("tool.call.started", { tool_call_id: `c${i}`, tool_name: i === 0 ? LEAD : "t", parameters: {} });
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      // A first write at once; the burst with the artifact behind it, read meanwhile, is the next batch, written mid-run.
      res.write(line("message.delta", { chunk: { role: "assistant", content: "working" } }));
      await new Promise((r) => setTimeout(r, 50));
      const burst = Array.from({ length: TELEMETRY }, (_, i) => telemetry(i)).join("");
      const artifact = line("artifact.created", { artifact_type: "file", name: "made.txt", mime_type: "text/plain", content_base64: Buffer.from("made mid-run").toString("base64") });
      res.write(burst + artifact + telemetry(TELEMETRY));
      // The run fails once that write goes unanswered; nothing more is read.
      await new Promise((r) => setTimeout(r, 3_000));
      res.end(line("run.completed", { finish_reason: "stop" }));
    },
  });
  host = await startTestHost({ vars: { DB_QUERY_TIMEOUT_MS: "1000" } });
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "mid-run-part-unanswered" });
});
afterAll(async () => {
  host?.databaseOutage(false);
  await host?.dispose();
  await runner?.close();
});

describe("a mid-run batch whose leading part goes unanswered", () => {
  it("leaves no transcript item naming the artifact whose row was never written, nor its blob", async () => {
    // The leading part's write waits past the query timeout, then is refused: unanswered, and not applied.
    host.databaseOutage({ delayMs: 1_500, matching: LEAD, queries: 1 });
    host.databaseOutage({ queries: 1, matching: LEAD });
    const posted = await host.postEvent(messageEvent("mid-run-part-unanswered", "go"));
    const run = await host.waitForRun(posted.body.run_id!, 20_000);
    expect([run.status, run.error?.code]).toEqual(["failed", "host.internal_error"]);
    const stored = new Set((await host.query<{ artifact_id: string }>("SELECT artifact_id FROM artifact WHERE run_id = ?", [run.run_id])).map((a) => a.artifact_id));
    const items = await host.query<{ artifact_refs_json: string | null }>("SELECT artifact_refs_json FROM transcript WHERE run_id = ?", [run.run_id]);
    const named = items.flatMap((i) => JSON.parse(i.artifact_refs_json ?? "[]") as { artifact_id: string }[]).map((r) => r.artifact_id);
    expect(named.filter((id) => !stored.has(id))).toEqual([]);
    // Every blob stored under an artifact id has its row (the first write stored none).
    const blobs = (await host.r2Keys("artifacts/")).map((k) => k.slice("artifacts/".length));
    const rows = new Set((await host.query<{ artifact_id: string }>("SELECT artifact_id FROM artifact")).map((a) => a.artifact_id));
    expect(blobs.filter((id) => !rows.has(id))).toEqual([]);
  }, 30_000);
});
