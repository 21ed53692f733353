import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { messageEvent, readSse, runEndedLines, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { putAgent } from "../support/scripted-runner";

/**
 * The database is slow (a write applied after the Worker gave up on it), then refuses the host's follow-up write
 * once, then is back: a final write that landed late reaches the run's followers; a claim that landed late is
 * resumed by the same instance, and the run reaches its runner once.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const release = deferred<void>();
const REPLY = "late-final-reply-applied-but-unanswered";
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "late",
    async onRun({ body }, res) {
      const w = resultWriter(res, body.context.run_id);
      if (body.context.input.text === "hold") await release.promise;
      w.reply(body.context.input.text === "hold" ? REPLY : `done: ${body.context.input.text}`);
    },
  });
  host = await startTestHost({ captureLogs: true, vars: { DB_QUERY_TIMEOUT_MS: "2000", RUN_WATCHDOG_INTERVAL_MS: "1000" } });
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
});
afterAll(async () => {
  release.resolve();
  await host?.dispose();
  await runner?.close();
});

describe("a run whose final write was applied unanswered, and whose host-failure record was refused", () => {
  it("its followers get the final frames before `end`, as the ledger has them", async () => {
    const c = "late-final-then-refused";
    await putAgent(host, { agent_id: `agent-${c}`, runner_id: runner.runnerId(), scope: { type: "conversation", id: c } });
    const posted = await host.postEvent(messageEvent(c, "hold"));
    const runId = posted.body.run_id!;
    const stream = fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` } });
    await sleep(300);
    // The final batch is held past the Worker's 2 s timeout, then applied; the host-failure end that follows is refused once.
    host.databaseOutage({ delayMs: 3_000, matching: REPLY });
    // Every end the host writes itself (endRunAsHost: host failure, then lost run) is refused until the final batch has landed.
    host.databaseOutage({ queries: 1000, matching: "changes() = 1" });
    release.resolve();
    await sleep(3_500);
    host.databaseOutage({ queries: 0 });
    const sse = await readSse(await stream);
    const run = await host.waitForRun(runId);
    const ledger = (await host.admin("GET", `/v1/runs/${runId}/events`)).body.items.map((e: any) => e.type);
    expect({ status: run.status, ledger }).toEqual({ status: "completed", ledger: ["message.completed", "run.completed"] });
    expect({ end: sse.end, frames: sse.frames.map((f) => f.type) }).toEqual({ end: "completed", frames: ["message.completed", "run.completed"] });
    // Its end's line is logged once, as that end said, by the end as lost that found it applied.
    await expect.poll(() => runEndedLines(host.logs(), runId)).toEqual([expect.objectContaining({ status: "completed", ended_by: "run", results_read: 2 })]);
  }, 30_000);
});

describe("a run whose claim (created → running) was applied unanswered, and whose failure record was refused", () => {
  it("is tried again once the database is back and reaches its runner, rather than ending as lost", async () => {
    const c = "late-claim-then-refused";
    // A debounce leaves time to arm the drill between the 202 and the run's claim.
    await putAgent(host, { agent_id: `agent-${c}`, runner_id: runner.runnerId(), scope: { type: "conversation", id: c }, concurrency: { debounce_ms: 1000 } });
    const posted = await host.postEvent(messageEvent(c, "start me"));
    const runId = posted.body.run_id!;
    // The claim batch (its `started_at` update) is held past the Worker's timeout, then applied; the failure record is refused once.
    host.databaseOutage({ delayMs: 3_000, matching: 'started_at\\" = ?' });
    host.databaseOutage({ queries: 1, matching: "the host failed to record the run" });
    const run = await host.waitForRun(runId, 20_000);
    const calls = runner.calls.filter((call) => call.body.context.run_id === runId).length;
    expect({ status: run.status, code: run.error?.code, runnerCalls: calls }).toEqual({ status: "completed", code: undefined, runnerCalls: 1 });
    await expect.poll(() => runEndedLines(host.logs(), runId)).toEqual([expect.objectContaining({ status: "completed", ended_by: "run" })]);
  }, 30_000);
});
