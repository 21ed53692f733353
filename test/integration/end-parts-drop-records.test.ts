/**
 * A batch of more than 2,048 ledger rows writes its first rows in parts of their own (ledger-writes.ts). A result the
 * host dropped may be among them; what records the drop must then go with it, whichever later write of the batch is
 * refused for good:
 * - its warning, even when it does not follow the result (a refused reference's comes after the whole batch): the
 *   ledger alone says the result was dropped, so its followers, a replay and a reply rebuilt from it never take it
 *   for an accepted one;
 * - its `runner.result_dropped` audit, or the count of drops not audited: every drop the ledger holds is recorded
 *   exactly once, by its own record or by the count (the host's own end counts them from the ledger, recorded-end.ts).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { startAdHocRunner } from "../support/runner";

/** Telemetry before and after the dropped result: it is in the second 2,048 rows of its batch, the burst's tail past them. */
const TELEMETRY = 2_100;
/** Named only by a burst's last telemetry line: in the write of the rest, never in a leading part. */
const tailOf = (text: string) => `probe-tail-${text}`;
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "end-parts-drop-records",
    async onRun({ body }, res) {
      const runId = body.context.run_id;
      const text: string = body.context.input.text;
      const line = (type: string, data: unknown) => JSON.stringify({ run_id: runId, type, data }) + "\n";
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      const burst = Array.from({ length: 2 * TELEMETRY }, (_, i) => line("tool.call.started", { tool_call_id: `c${i}`, tool_name: i === 2 * TELEMETRY - 1 ? tailOf(text) : "t", parameters: {} }));
      // A scope no run has: dropped as an invalid payload. An artifact id the host never stored: its reference refused.
      const dropped = text === "reference" ? line("artifact.created", { artifact_type: "file", artifact_id: "art_probe_never_stored" }) : line("state.updated", { scope: "galaxy", key: "k", value: 1 });
      if (text === "mid-run") {
        // A first write at once; the dropped result and the burst, read meanwhile, are held into the next batch, written
        // when due (RUN_WRITE_INTERVAL_MS) while the runner waits: a batch of the run's, not its end.
        res.write(line("message.delta", { chunk: { role: "assistant", content: "working" } }));
        await new Promise((r) => setTimeout(r, 50));
        res.write(burst.slice(0, TELEMETRY).join("") + dropped + burst.slice(TELEMETRY).join(""));
        await new Promise((r) => setTimeout(r, 1_000));
      } else res.write(burst.slice(0, TELEMETRY).join("") + dropped + burst.slice(TELEMETRY).join(""));
      res.end(line("message.completed", { message: { role: "assistant", content: "done" } }) + line("run.completed", { finish_reason: "stop" }));
    },
  });
  host = await startTestHost();
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "end-parts-drop-records" });
});
afterAll(async () => {
  host?.databaseOutage(false);
  await host?.dispose();
  await runner?.close();
});

/** The run, its batch's write holding the burst's tail refused on its first try and its three retries. */
async function runRefusingTail(text: string) {
  host.databaseOutage({ queries: 4, matching: tailOf(text) });
  const posted = await host.postEvent(messageEvent(`end-parts-drop-records-${text}`, text));
  const run = await host.waitForRun(posted.body.run_id!, 20_000);
  expect([run.status, run.error?.code]).toEqual(["failed", "host.internal_error"]);
  // The burst's first rows were written apart: the refusal hit the write of the rest.
  expect((await host.query("SELECT 1 FROM run_event WHERE run_id = ? AND type = 'tool.call.started'", [run.run_id])).length).toBeGreaterThanOrEqual(2_000);
  return run.run_id;
}

/** The results the ledger says were dropped (a warning names each), and how the EventLog records drops: each on its own, or counted. */
async function dropRecords(runId: string) {
  const warnings = await host.query<{ data_json: string }>("SELECT data_json FROM run_event WHERE run_id = ? AND type = 'host.warning'", [runId]);
  const named = warnings.map((w) => JSON.parse(w.data_json).ledger_seq).filter((seq): seq is number => typeof seq === "number");
  const audits = (await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE event_type = 'runner.result_dropped' AND run_id = ?", [runId])).map((r) => JSON.parse(r.data_json));
  const own = audits.filter((a) => a.ledger_seq !== null).map((a) => a.ledger_seq as number);
  const counted = audits.filter((a) => a.ledger_seq === null).reduce((n, a) => n + a.suppressed, 0);
  return { named, own, counted };
}

describe("a dropped result written in a leading part of its batch", () => {
  it("is recorded once when the host ends the run, its end's rest refused for good", async () => {
    const runId = await runRefusingTail("end");
    const { named, own, counted } = await dropRecords(runId);
    expect(named).toHaveLength(1);
    expect(own.filter((seq) => named.includes(seq)).length + counted).toBe(named.length);
  }, 30_000);

  it("is recorded once when the run ends itself after a batch's rest was refused for good", async () => {
    const runId = await runRefusingTail("mid-run");
    const { named, own, counted } = await dropRecords(runId);
    expect(named).toHaveLength(1);
    expect(own.filter((seq) => named.includes(seq)).length + counted).toBe(named.length);
  }, 30_000);

  it("is never in the ledger without its warning when that comes after the batch (a refused reference)", async () => {
    const runId = await runRefusingTail("reference");
    const announced = await host.query<{ seq: number }>("SELECT seq FROM run_event WHERE run_id = ? AND type = 'artifact.created'", [runId]);
    const { named } = await dropRecords(runId);
    expect(announced.filter((a) => !named.includes(a.seq))).toEqual([]);
  }, 30_000);
});
