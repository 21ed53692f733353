/**
 * A result the host dropped may be written ahead of the rest of its batch (ledger-writes.ts), but never apart from the
 * warning naming it that follows it: the ledger alone says it was dropped (markDropped), so a reply rebuilt from it
 * after a write of the rest refused for good must still see the message past RUN_MAX_MESSAGES as dropped.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { startAdHocRunner } from "../support/runner";

/** Telemetry before the message past the cap: it is the 2,048th row of its batch, its warning the 2,049th. */
const TELEMETRY = 2_047;
const OVER = "probe-over-cap-at-part-end";
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "end-parts-drop-warning",
    async onRun({ body }, res) {
      const runId = body.context.run_id;
      const line = (type: string, data: unknown) => JSON.stringify({ run_id: runId, type, data }) + "\n";
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      // The run's one message, written at once; then, in one chunk, a burst and the message past the cap.
      res.write(line("message.completed", { message: { role: "assistant", content: "first" } }));
      await new Promise((r) => setTimeout(r, 300));
      const burst = Array.from({ length: TELEMETRY }, (_, i) => line("tool.call.started", { tool_call_id: `c${i}`, tool_name: "t", parameters: {} }));
      res.end(burst.join("") + line("message.completed", { message: { role: "assistant", content: OVER } }));
    },
  });
  host = await startTestHost({ vars: { RUN_MAX_MESSAGES: "1" } });
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "end-parts-drop-warning" });
});
afterAll(async () => {
  host?.databaseOutage(false);
  await host?.dispose();
  await runner?.close();
});

describe("a dropped result at the end of a part written apart", () => {
  it("is written with the warning naming it", async () => {
    // The write of the rest (the cap's warning and the run's end name RUN_MAX_MESSAGES), refused for good.
    host.databaseOutage({ queries: 4, matching: "RUN_MAX_MESSAGES" });
    const posted = await host.postEvent(messageEvent("end-parts-drop-warning", "go"));
    const run = await host.waitForRun(posted.body.run_id!);
    expect([run.status, run.error?.code]).toEqual(["failed", "host.internal_error"]);
    const over = await host.query<{ seq: number }>("SELECT seq FROM run_event WHERE run_id = ? AND type = 'message.completed' AND data_json LIKE ?", [run.run_id, `%${OVER}%`]);
    const warnings = await host.query<{ data_json: string }>("SELECT data_json FROM run_event WHERE run_id = ? AND type = 'host.warning'", [run.run_id]);
    const named = warnings.map((w) => JSON.parse(w.data_json).ledger_seq);
    expect(over.map((o) => named.includes(o.seq))).not.toContain(false);
    // The burst itself was written apart.
    expect((await host.query("SELECT 1 FROM run_event WHERE run_id = ? AND type = 'tool.call.started'", [run.run_id])).length).toBe(TELEMETRY);
  }, 20_000);
});
