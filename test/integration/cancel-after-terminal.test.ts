import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { messageEvent, readSse, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { putAgent } from "../support/scripted-runner";

/**
 * README: cancel "abort[s] an active run (ends `cancelled`) ... 202 {status: "cancelling"}; 409 once ended".
 * ConversationDO.cancel answers `cancelled: false` once the runner's stream is over. But between reading the
 * runner's terminal result and marking the run finishing, executeRun awaits the terminal batch's own I/O
 * (artifact refs looked up, inline blobs put to R2): a cancel then is answered 202 and the run completes.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const release = deferred<void>();
const ART = "art_probe_terminal_batch_ref";

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "terminal",
    async onRun({ body }, res) {
      const w = resultWriter(res, body.context.run_id);
      await release.promise;
      // One chunk: a reference the host looks up, the message and the terminal result.
      const lines = [
        { type: "artifact.created", data: { artifact_type: "file", artifact_id: ART } },
        { type: "message.completed", data: { message: { role: "assistant", content: "all done" } } },
        { type: "run.completed", data: { finish_reason: "stop" } },
      ].map((r, i) => JSON.stringify({ run_id: body.context.run_id, ...r, sequence: i + 1 }) + "\n");
      res.write(lines.join(""));
      res.end();
      void w;
    },
  });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
});
afterAll(async () => {
  release.resolve();
  await host?.dispose();
  await runner?.close();
});

describe("cancel while the runner's terminal result is being applied", () => {
  it("is not answered 202 cancelling for a run that then ends completed", async () => {
    const c = "probe-cancel-terminal";
    await putAgent(host, { agent_id: `agent-${c}`, runner_id: runner.runnerId(), scope: { type: "conversation", id: c } });
    const posted = await host.postEvent(messageEvent(c, "go"));
    const runId = posted.body.run_id!;
    const stream = fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` } });
    await new Promise((r) => setTimeout(r, 300));
    // The terminal batch's artifact lookup takes a while (one Turso round trip in production).
    host.databaseOutage({ delayMs: 1_500, matching: ART });
    release.resolve();
    await new Promise((r) => setTimeout(r, 500));
    const cancel = await host.admin("POST", `/v1/runs/${runId}/cancel`);
    const run = await host.waitForRun(runId);
    const sse = await readSse(await stream);
    // Either the cancel lost (409, completed) or it won (202, cancelled): never 202 and completed.
    const seen = { cancel: cancel.status, status: run.status, end: sse.end };
    expect(seen).toEqual(cancel.status === 202 ? { cancel: 202, status: "cancelled", end: "cancelled" } : { cancel: 409, status: "completed", end: "completed" });
  });
});
