import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { messageEvent, readSse, startTestHost, type TestHost } from "../support/host";
import { startAdHocRunner } from "../support/runner";
import { putAgent } from "../support/scripted-runner";

/**
 * A result batch written mid-run whose write gets no answer in time, though the database applied it: the run ends
 * (host.internal_error), and its ledger holds that batch, recorded before the run's end. A live follower of the run
 * (GET /v1/runs/{id}/stream) must get what the ledger holds, as a replay does: it is told `end` and never reconnects,
 * so an entry it was not sent is lost to it (README: "a run whose own end landed unanswered ... its followers and its
 * chat reply get what it recorded"; an earlier batch deserves the same).
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const started = deferred<string>();
const go = deferred<void>();
const MARK = "probe-unanswered-mid-batch";

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "unanswered-batch",
    async onRun({ body }, res) {
      const runId = body.context.run_id;
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      started.resolve(runId);
      await go.promise;
      res.write(JSON.stringify({ run_id: runId, type: "tool.call.started", data: { tool_call_id: MARK, tool_name: "t", parameters: {} } }) + "\n");
      await new Promise((r) => setTimeout(r, 3_000));
      if (!res.destroyed) res.end(JSON.stringify({ run_id: runId, type: "run.completed", data: { finish_reason: "stop", message: { role: "assistant", content: "late" } } }) + "\n");
    },
  });
  host = await startTestHost({ vars: { DB_QUERY_TIMEOUT_MS: "1000" } });
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
  await putAgent(host, { agent_id: "unanswered-batch", runner_id: runner.runnerId() });
});
afterAll(async () => {
  go.resolve();
  host?.databaseOutage(false);
  await host?.dispose();
  await runner?.close();
});

const stream = (runId: string) => fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` } });
const bySeq = (frames: { seq: number; type: string }[]) => [...frames].sort((a, b) => a.seq - b.seq).map((f) => `${f.seq} ${f.type}`);

describe("a live follower of a run whose mid-run write was applied but not answered", () => {
  it("gets every entry the ledger recorded before the run's end, as a replay does", async () => {
    const runId = (await host.postEvent(messageEvent("unanswered-batch", "go"))).body.run_id!;
    expect(await started.promise).toBe(runId);
    const live = stream(runId);
    // The follower is in place before anything is written.
    await new Promise((r) => setTimeout(r, 300));
    // The batch's write is applied only after the host has stopped waiting for it (1.2 s > DB_QUERY_TIMEOUT_MS);
    // the run's end is refused twice (retried after 0.2 s and 1 s), so it lands after that batch.
    host.databaseOutage({ delayMs: 1_200, matching: MARK });
    host.databaseOutage({ queries: 2, matching: "run.failed" });
    go.resolve();

    const followed = await readSse(await live);
    expect(followed.end).toBe("failed");
    const rows = await host.query<{ seq: number; type: string }>("SELECT seq, type FROM run_event WHERE run_id = ? ORDER BY rowid", [runId]);
    // Recorded before the run's end.
    expect(rows.map((r) => `${r.seq} ${r.type}`)).toEqual(["1 tool.call.started", "2 run.failed"]);
    const replayed = await readSse(await stream(runId));
    expect(bySeq(replayed.frames)).toEqual(["1 tool.call.started", "2 run.failed"]);
    expect(bySeq(followed.frames)).toEqual(bySeq(replayed.frames));
  });
});
