import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, readSse, startTestHost, type TestHost } from "../support/host";
import { startAdHocRunner } from "../support/runner";
import { putAgent } from "../support/scripted-runner";

/**
 * README: cancel "abort[s] an active run (ends `cancelled`) ... 202 {status: "cancelling"}"; "A run whose runner already
 * sent its terminal result ... is not cancelled: the answer (409) waits for its end and names it". While the host writes
 * one batch of results (a database round trip), the runner's last chunk (its message and run.completed) may already
 * have been read off the connection. A cancel in that moment is answered 202, yet the run then applies that chunk and
 * ends completed: the operator is told "cancelling" for a run that completes (and whose answer is delivered).
 */
const DELTA = "first-delta-held-in-db-7f3a";
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "inhand",
    async onRun({ body }, res) {
      const runId = body.context.run_id;
      const line = (l: unknown) => JSON.stringify(l) + "\n";
      const first = line({ run_id: runId, type: "message.delta", data: { chunk: { role: "assistant", content: DELTA } }, sequence: 1 });
      // One write: the message and the terminal result, as a runner flushing its end writes them.
      const last =
        line({ run_id: runId, type: "message.completed", data: { message: { role: "assistant", content: "the whole answer" } }, sequence: 2 }) +
        line({ run_id: runId, type: "run.completed", data: { finish_reason: "stop" }, sequence: 3 });
      res.writeHead(200, { "content-type": "application/x-ndjson", "content-length": String(Buffer.byteLength(first + last)) });
      res.write(first);
      await new Promise((r) => setTimeout(r, 300));
      res.end(last);
    },
  });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

describe("cancel while the runner's last chunk waits to be applied", () => {
  it("is not answered 202 cancelling for a run that then ends completed", async () => {
    const c = "cancel-in-hand";
    await putAgent(host, { agent_id: `agent-${c}`, runner_id: runner.runnerId(), scope: { type: "conversation", id: c } });
    // The first batch's write takes a while (one Turso round trip in production); the runner finishes meanwhile.
    host.databaseOutage({ delayMs: 2_000, matching: DELTA });
    const posted = await host.postEvent(messageEvent(c, "go"));
    const runId = posted.body.run_id!;
    const stream = fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` } });
    await new Promise((r) => setTimeout(r, 1_000));
    const cancel = await host.admin("POST", `/v1/runs/${runId}/cancel`);
    const run = await host.waitForRun(runId);
    const sse = await readSse(await stream);
    const seen = { cancel: cancel.status, status: run.status, end: sse.end };
    // Either the cancel lost (409, completed) or it won (202, cancelled): never 202 and completed.
    expect(seen).toEqual(cancel.status === 202 ? { cancel: 202, status: "cancelled", end: "cancelled" } : { cancel: 409, status: "completed", end: "completed" });
  });
});
