import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runOf } from "../support/conversation-runners";
import { waitFor } from "../support/fake-platform";
import { messageEvent, runEndedLines, startTestHost, unhandedRun, type TestHost } from "../support/host";
import { keyedGates } from "../support/host-api";
import { startAdHocRunner } from "../support/runner";
import { putAgent } from "../support/scripted-runner";

/**
 * A run's end whose write the database applied but never answered (past DB_QUERY_TIMEOUT_MS) still has its one
 * `run.ended` line, logged by whatever then finds the run ended so (its start, the same cancel sent again, the host's
 * end), and that line times the run to the end as recorded (`ended_at`), not to when it was found.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const gates = keyedGates();
const called = new Set<string>();
const QUICK_REPLY = "quick-reply-applied-unanswered";
const REFUSED_CODE = "tests.end_refused";

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "endedunanswered",
    async onRun(call, res) {
      const { w, conversation, text } = runOf(call, res);
      called.add(conversation);
      if (text === "hold") await gates.gate(conversation).promise;
      if (text === "fail") return void (w.send("run.failed", { code: REFUSED_CODE, error: "the runner gave up", retryable: false }), res.end());
      w.reply(text === "quick" ? QUICK_REPLY : `re: ${text}`);
    },
  });
  // The watchdog beats each second: a run whose end is not recorded is ended as lost that soon.
  host = await startTestHost({ vars: { DB_QUERY_TIMEOUT_MS: "1000", RUN_WATCHDOG_INTERVAL_MS: "1000" }, captureLogs: true });
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
});
afterAll(async () => {
  gates.releaseAll();
  await host?.dispose();
  await runner?.close();
});

const agentFor = (c: string) => putAgent(host, { agent_id: `agent-${c}`, runner_id: runner.runnerId(), scope: { type: "conversation", id: c } });
/** When ingress minted the run id: its time part, before the 12 hex characters that end it. */
const mintedAt = (runId: string) => parseInt(/_([0-9a-z]+)$/.exec(runId)![1]!.slice(0, -12), 36);
/** The run's lines, after a moment for a second one to show. */
async function linesOnceSettled(runId: string) {
  await expect.poll(() => runEndedLines(host.logs(), runId).length, { timeout: 10_000 }).toBeGreaterThan(0);
  await new Promise((r) => setTimeout(r, 300));
  return runEndedLines(host.logs(), runId);
}
const cancelledByHost = (runId: string) => expect.objectContaining({ status: "cancelled", run_id: runId, error_code: "cancelled", ended_by: "host", queued_ms: null, duration_ms: null });

/** A run waiting behind a held one, whose cancel's end write is applied and its answer held past the query timeout. */
async function queuedRunCancelledUnanswered(c: string) {
  await agentFor(c);
  const busy = await host.postEvent(messageEvent(c, "hold"));
  await waitFor(() => called.has(c), 10_000, `the busy run of ${c}`);
  const queued = await host.postEvent(messageEvent(c, "next"));
  expect(queued.body.disposition).toBe("queued");
  host.databaseOutage({ answerDelayMs: 2_000, matching: "run cancelled before it started" });
  expect((await host.admin("POST", `/v1/runs/${queued.body.run_id}/cancel`)).status).toBeGreaterThanOrEqual(500);
  expect((await host.waitForRun(queued.body.run_id!)).status).toBe("cancelled");
  return { busy: busy.body.run_id!, queued: queued.body.run_id! };
}

describe("run.ended of a run never handed over", () => {
  it("is logged once by the cron's end of it, which knows nothing of where its event came from", async () => {
    const c = "never-handed-over";
    await agentFor(c);
    const lost = await unhandedRun(host, c, "evt-never-handed-over-logged");
    await host.triggerScheduled({ scheduledTime: new Date(Date.now() + 11 * 60_000) });
    expect((await host.waitForRun(lost)).status).toBe("failed");
    expect(await linesOnceSettled(lost)).toEqual([
      expect.objectContaining({ status: "failed", error_code: "host.not_handed_over", ended_by: "host", platform: null, conversation_id: c, queued_ms: null, duration_ms: null, results_read: null, cause: null }),
    ]);
  }, 30_000);
});

describe("run.ended, its end's write applied unanswered", () => {
  it("a queued run's cancel: logged once by its start, which finds it cancelled", async () => {
    const { busy, queued } = await queuedRunCancelledUnanswered("unanswered-cancel-start");
    gates.gate("unanswered-cancel-start").resolve();
    expect((await host.waitForRun(busy)).status).toBe("completed");
    expect(await linesOnceSettled(queued)).toEqual([cancelledByHost(queued)]);
    expect(runEndedLines(host.logs(), busy)).toHaveLength(1);
  }, 30_000);

  it("a queued run's cancel: logged once by the same cancel sent again", async () => {
    const { busy, queued } = await queuedRunCancelledUnanswered("unanswered-cancel-again");
    expect((await host.admin("POST", `/v1/runs/${queued}/cancel`)).status).toBe(409);
    expect(await linesOnceSettled(queued)).toEqual([cancelledByHost(queued)]);
    gates.gate("unanswered-cancel-again").resolve();
    expect((await host.waitForRun(busy)).status).toBe("completed");
    expect(await linesOnceSettled(queued)).toHaveLength(1);
  }, 30_000);

  it("a cancel of a run never handed over: logged once by the same cancel sent again", async () => {
    const c = "unanswered-cancel-unhanded";
    await agentFor(c);
    const lost = await unhandedRun(host, c, "evt-unanswered-unhanded");
    host.databaseOutage({ answerDelayMs: 2_000, matching: "run cancelled before it reached its conversation" });
    expect((await host.admin("POST", `/v1/runs/${lost}/cancel`)).status).toBeGreaterThanOrEqual(500);
    expect((await host.waitForRun(lost)).status).toBe("cancelled");
    expect((await host.admin("POST", `/v1/runs/${lost}/cancel`)).status).toBe(409);
    expect(await linesOnceSettled(lost)).toEqual([expect.objectContaining({ status: "cancelled", error_code: "cancelled", ended_by: "host", platform: null })]);
  }, 30_000);

  it("a run's own end, found applied by the host's end: timed to its recorded end, not to when it was found", async () => {
    const c = "unanswered-own-end";
    await agentFor(c);
    host.databaseOutage({ answerDelayMs: 2_000, matching: QUICK_REPLY });
    const { run_id } = (await host.postEvent(messageEvent(c, "quick"))).body;
    const run = await host.waitForRun(run_id!);
    expect(run.status).toBe("completed");
    const [line, ...more] = await linesOnceSettled(run_id!);
    expect(more).toEqual([]);
    expect(line).toMatchObject({ status: "completed", ended_by: "run" });
    // The host's end found it only once the query timeout (1 s) had passed: that wait is not the run's.
    expect(line!.total_ms).toBe(Date.parse(run.ended_at as string) - mintedAt(run_id!));
    expect(line!.duration_ms).toBeLessThan(1_000);
  }, 30_000);

  it("the run's own end refused, the host's end of it applied unanswered: the end as lost logs the host's, as recorded", async () => {
    const c = "unanswered-host-end";
    await agentFor(c);
    host.databaseOutage({ queries: 20, matching: REFUSED_CODE });
    host.databaseOutage({ answerDelayMs: 2_000, matching: "the host failed to record the run" });
    const { run_id } = (await host.postEvent(messageEvent(c, "fail"))).body;
    expect(await host.waitForRun(run_id!)).toMatchObject({ status: "failed", error: { code: "host.internal_error" } });
    host.databaseOutage({ queries: 0 });
    // Not the runner's end (never recorded), though its status is the same.
    expect(await linesOnceSettled(run_id!)).toEqual([expect.objectContaining({ status: "failed", error_code: "host.internal_error", ended_by: "host", cause: expect.any(String) })]);
  }, 30_000);
});
