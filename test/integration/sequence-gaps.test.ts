import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { startAdHocRunner } from "../support/runner";
import { putAgent } from "../support/scripted-runner";

/**
 * README "Writing a runner": "Result `sequence` numbers are optional; a duplicate is dropped, a gap or
 * reordering warned about (`host.warning`)"; PROTOCOL §7: the host "warns on gaps or reordering; it never
 * waits for a missing number". A runner whose numbers skip (it numbers every internal event, or counts in
 * twos) streams a long answer: every gap should cost a warning, not the run.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const DELTAS = 4200;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "skipper",
    onRun: ({ body }, res) => {
      const runId = body.context.run_id;
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      let seq = 0;
      // Numbers in twos: 2, 4, 6, ... (every odd number is a gap the runner never fills).
      const line = (type: string, data: unknown) => `${JSON.stringify({ run_id: runId, type, data, sequence: (seq += 2) })}\n`;
      let out = "";
      for (let i = 0; i < DELTAS; i++) out += line("message.delta", { chunk: { role: "assistant", content: "w " } });
      out += line("message.completed", { message: { role: "assistant", content: "w ".repeat(DELTAS) } });
      out += line("run.completed", { finish_reason: "stop" });
      res.end(out);
    },
  });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
  await putAgent(host, { agent_id: "skipper", runner_id: runner.runnerId(), scope: { type: "global" } });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

describe("result sequence gaps", () => {
  it("a long answer whose sequence numbers skip is warned about, not failed", async () => {
    const posted = await host.postEvent(messageEvent("gaps", "tell me a long story"));
    const run = await host.waitForRun(posted.body.run_id!, 60_000);
    expect([run.status, run.error?.code]).toEqual(["completed", undefined]);
    expect(run.message?.content).toBe("w ".repeat(DELTAS));
    // Told once that the lowest gaps were closed, beside one gap warning per jump.
    const [closed] = await host.query<{ n: number }>("SELECT count(*) AS n FROM run_event WHERE run_id = ? AND type = 'host.warning' AND data_json LIKE '%result.gaps_closed%'", [run.run_id]);
    expect(closed.n).toBe(1);
  }, 90_000);
});
