import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { messageEvent, runEndedLines, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { putAgent } from "../support/scripted-runner";
import { streamOfUnansweredFinalWrite } from "../support/unanswered-final-write";

/**
 * The run's final write (its reply, run.completed and the `completed` status, one batch) gets no answer
 * in time but was applied (a Turso round trip timing out: the executor itself calls that "may have applied").
 * runOne then ends the run as a host failure; that write finds the run already ended (`{ entry: null }`),
 * so the run counts as recorded, and its followers are told `end: failed` (runOne's initial `status`),
 * while GET /v1/runs/{id} says `completed` and the ledger ends with run.completed; the followers never
 * get the final message or run.completed frames.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const release = deferred<void>();
const REPLY = "probe-final-reply-applied-but-unanswered";

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "final",
    async onRun({ body }, res) {
      const w = resultWriter(res, body.context.run_id);
      await release.promise;
      w.reply(REPLY);
    },
  });
  host = await startTestHost({ vars: { DB_QUERY_TIMEOUT_MS: "2000" }, captureLogs: true });
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
});
afterAll(async () => {
  release.resolve();
  await host?.dispose();
  await runner?.close();
});

describe("a run whose final write was applied but not answered in time", () => {
  it("its stream ends with the status the run has, after its final frames", async () => {
    const c = "probe-final-unanswered";
    await putAgent(host, { agent_id: `agent-${c}`, runner_id: runner.runnerId(), scope: { type: "conversation", id: c } });
    const posted = await host.postEvent(messageEvent(c, "go"));
    const runId = posted.body.run_id!;
    // The final batch is held past the Worker's 2 s timeout, then applied; the host-failure end that follows reaches the database after it, and is answered.
    const { sse, run } = await streamOfUnansweredFinalWrite(host, runId, REPLY, release.resolve);
    const ledger = (await host.admin("GET", `/v1/runs/${runId}/events`)).body.items.map((e: any) => e.type);
    expect({ status: run.status, ledgerLast: ledger.at(-1) }).toEqual({ status: "completed", ledgerLast: "run.completed" });
    expect({ end: sse.end, frames: sse.frames.map((f) => f.type) }).toEqual({ end: "completed", frames: ["message.completed", "run.completed"] });
    // Its end's line is logged once, as that end said, by the host's end that found it applied.
    await expect.poll(() => runEndedLines(host.logs(), runId)).toEqual([expect.objectContaining({ status: "completed", ended_by: "run", results_read: 2, error_code: null })]);
  });
});
