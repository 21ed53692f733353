/**
 * A run's end written in parts (more than 2,048 ledger rows held) writes apart only ledger rows nothing else of the
 * batch goes with: a message's ledger entry is written with its Transcript item (and a state.updated's with its state,
 * an artifact's with its row), so a write of the rest that fails for good never leaves an answer in the ledger, and
 * shown to the run's followers and chat, that the Transcript, which later runs read as history, does not have.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { startAdHocRunner } from "../support/runner";

const TELEMETRY = 3_000;
const EARLY = "probe-early-answer";
/** Named only by the burst's last telemetry line: past the first 2,048 rows, so in the write of the rest. */
const TAIL = "probe-tail-of-burst";
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "end-parts-effects",
    async onRun({ body }, res) {
      const runId = body.context.run_id;
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      // One chunk: the answer, then a burst of telemetry, all held and written with the run's end.
      const lines = [JSON.stringify({ run_id: runId, type: "message.completed", data: { message: { role: "assistant", content: EARLY } } })];
      for (let i = 0; i < TELEMETRY; i++) lines.push(JSON.stringify({ run_id: runId, type: "tool.call.started", data: { tool_call_id: `c${i}`, tool_name: i === TELEMETRY - 1 ? TAIL : "t", parameters: {} } }));
      lines.push(JSON.stringify({ run_id: runId, type: "run.completed", data: { finish_reason: "stop" } }));
      res.end(lines.join("\n") + "\n");
    },
  });
  host = await startTestHost();
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "end-parts-effects" });
});
afterAll(async () => {
  host?.databaseOutage(false);
  await host?.dispose();
  await runner?.close();
});

describe("a run's end written in parts, its last write refused for good", () => {
  it("leaves no answer in the ledger that its Transcript item does not go with", async () => {
    // The write holding the burst's tail: its first try and its three retries.
    host.databaseOutage({ queries: 4, matching: TAIL });
    const posted = await host.postEvent(messageEvent("end-parts-effects", "go"));
    const run = await host.waitForRun(posted.body.run_id!);
    expect([run.status, run.error?.code]).toEqual(["failed", "host.internal_error"]);
    const answers = await host.query<{ seq: number }>("SELECT seq FROM run_event WHERE run_id = ? AND type = 'message.completed'", [run.run_id]);
    const items = await host.query<{ content: string }>("SELECT content FROM transcript WHERE run_id = ? AND role = 'assistant'", [run.run_id]);
    expect({ ledger: answers.length, transcript: items.map((i) => i.content) }).toEqual({ ledger: items.length, transcript: items.length ? [EARLY] : [] });
  }, 20_000);
});
