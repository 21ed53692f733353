import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LocalHost } from "../../local/host";
import { adminCall, bindRunner } from "../../local/setup";
import { runOf } from "../support/conversation-runners";
import { waitFor } from "../support/fake-platform";
import { ADMIN_TOKEN, messageEvent, runEndedLines, SECRETS_KEY, startHostOn, waitForRunOn } from "../support/host";
import { keyedGates } from "../support/host-api";
import { startAdHocRunner } from "../support/runner";

/**
 * Every run ends with one JSON line on the Worker's log, `{"log":"run.ended",…}`, whatever ended it (its runner, its
 * deadline, a cancel, the host closing it: cancelled before it started, lost over a restart): what an operator counts
 * runs, failures and latencies by. Never a message, a runner's words, a token or a secret.
 */
const USER_TEXT = "PRIVATE-user-words-51c0de";
const ANSWER = "PRIVATE-answer-words-8e2f11";
const RUNNER_WORDS = "PRIVATE-runner-error-7d4a90";
const SERVICE_SECRET = "run-ended-service-secret-0123456789";

let dataDir: string;
let host: LocalHost;
let logs = "";
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const gates = keyedGates();
/** Runner calls by conversation; and every run token the runner was given. */
const called = new Map<string, number>();
const tokens: string[] = [];
/** Every run a test made, to check at the end that each has exactly one line. */
const made: string[] = [];

const start = (vars: Record<string, string>) => startHostOn(dataDir, { SECRETS_KEY, ...vars }, { onRuntimeOutput: (text) => (logs += text) });
const post = async (conversation: string, text: string) => {
  const res = await adminCall<{ run_id: string; disposition: string }>(host, "POST", "/v1/events", messageEvent(conversation, `${text} ${USER_TEXT}`));
  made.push(res.body.run_id);
  return res.body;
};
const untilCalled = (conversation: string, n = 1) => waitFor(() => (called.get(conversation) ?? 0) >= n, 10_000, `the runner called for ${conversation}`);
/** The run's one end line, once logged. */
async function endLineOf(runId: string): Promise<Record<string, unknown>> {
  await expect.poll(() => runEndedLines(logs, runId).length, { timeout: 10_000 }).toBeGreaterThan(0);
  const lines = runEndedLines(logs, runId);
  expect(lines).toHaveLength(1);
  return lines[0]!;
}
/** Run and runner as every line names them. */
const ranAt = (conversation: string, agent: string, runner: string) => ({ log: "run.ended", agent_id: agent, runner_id: runner, platform: "api", bot_id: null, conversation_id: conversation });
const ms = expect.any(Number);

async function bind(agentId: string, conversation: string, runnerName = "plain") {
  await bindRunner(host, { baseUrl: runner.url, secret: SERVICE_SECRET, runnerId: runner.runnerId(runnerName), agentId, scope: { type: "conversation", id: conversation } });
}

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "agent-host-run-ended-"));
  const caps = (steering: boolean) => ({ capabilities: { streaming: true, steering }, permissions: {} });
  runner = await startAdHocRunner({
    name: "runended",
    runners: [
      { name: "plain", label: { en_US: "plain" }, ...caps(false) },
      { name: "steers", label: { en_US: "steers" }, ...caps(true) },
    ],
    async onRun(call, res) {
      const { ctx, w, conversation, text, api } = runOf(call, res);
      called.set(conversation, (called.get(conversation) ?? 0) + 1);
      tokens.push(ctx.runtime.api.token);
      if (text.startsWith("fail")) {
        w.send("run.failed", { code: "tests.upstream_down", error: `could not answer ${RUNNER_WORDS}`, retryable: false });
        return void res.end();
      }
      if (text.startsWith("hold")) await gates.gate(conversation).promise;
      if (text.startsWith("steer")) {
        await gates.gate(conversation).promise;
        const pulled = (await api("steering.pull", { mode: "all" })).body.data.items as unknown[];
        return w.reply(`${ANSWER}: pulled ${pulled.length}`);
      }
      // Some time in the runner, which the line's duration counts.
      await new Promise((r) => setTimeout(r, 150));
      w.reply(ANSWER);
    },
  });
  // The watchdog beats each second: a run lost over the restart is found that soon.
  host = await start({ RUN_DEADLINE_MS: "8000", RUN_WATCHDOG_INTERVAL_MS: "1000" });
});
afterAll(async () => {
  gates.releaseAll();
  await host?.dispose();
  await runner?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

describe("run.ended", () => {
  it("a completed run: where it ran, how long it waited and ran, how many results its runner sent", async () => {
    await bind("ended-ok", "ended-ok");
    const before = Date.now();
    const { run_id } = await post("ended-ok", "answer");
    expect(await waitForRunOn(host, run_id)).toMatchObject({ status: "completed" });
    const after = Date.now();
    const line = await endLineOf(run_id);
    expect(line).toEqual({
      ...ranAt("ended-ok", "ended-ok", runner.runnerId("plain")),
      status: "completed",
      run_id,
      error_code: null,
      ended_by: "run",
      queued_ms: ms,
      duration_ms: ms,
      total_ms: ms,
      results_read: 2,
      steered: 0,
      cause: null,
    });
    // Timed from its event's acceptance, through its runner's call (the runner took 150 ms), to its end.
    expect(line.duration_ms).toBeGreaterThanOrEqual(150);
    expect(line.total_ms).toBe((line.queued_ms as number) + (line.duration_ms as number));
    expect(line.total_ms).toBeLessThanOrEqual(after - before);
  });

  it("a run its runner failed: the runner's code, never its words", async () => {
    await bind("ended-fail", "ended-fail");
    const { run_id } = await post("ended-fail", "fail");
    expect(await waitForRunOn(host, run_id)).toMatchObject({ status: "failed", error: { code: "tests.upstream_down" } });
    expect(await endLineOf(run_id)).toEqual({
      ...ranAt("ended-fail", "ended-fail", runner.runnerId("plain")),
      status: "failed",
      run_id,
      error_code: "tests.upstream_down",
      ended_by: "run",
      queued_ms: ms,
      duration_ms: ms,
      total_ms: ms,
      results_read: 1,
      steered: 0,
      cause: null,
    });
  });

  it("a run that took in steered messages says how many", async () => {
    await bind("ended-steer", "ended-steer", "steers");
    const { run_id } = await post("ended-steer", "steer");
    await untilCalled("ended-steer");
    expect((await post("ended-steer", "more")).disposition).toBe("steered");
    made.pop(); // steered: its event has no run of its own
    gates.gate("ended-steer").resolve();
    expect(await waitForRunOn(host, run_id)).toMatchObject({ status: "completed", message: { content: `${ANSWER}: pulled 1` } });
    expect(await endLineOf(run_id)).toMatchObject({ status: "completed", ended_by: "run", steered: 1, runner_id: runner.runnerId("steers") });
  });

  it("an agent deleted: its running run cancelled by its own end, its queued one by the host, before its runner was called", async () => {
    await bind("ended-deleted", "ended-deleted");
    const running = await post("ended-deleted", "hold");
    await untilCalled("ended-deleted");
    const queued = await post("ended-deleted", "answer");
    expect(queued.disposition).toBe("queued");
    expect((await adminCall(host, "DELETE", "/v1/admin/agents/ended-deleted")).status).toBe(200);
    for (const r of [running, queued]) expect(await waitForRunOn(host, r.run_id)).toMatchObject({ status: "cancelled" });
    const where = ranAt("ended-deleted", "ended-deleted", runner.runnerId("plain"));
    expect(await endLineOf(running.run_id)).toEqual({ ...where, status: "cancelled", run_id: running.run_id, error_code: "cancelled", ended_by: "run", queued_ms: ms, duration_ms: ms, total_ms: ms, results_read: 0, steered: 0, cause: null });
    // Never called: no wait for a call, nor a run after it; only the time from its acceptance to its end.
    expect(await endLineOf(queued.run_id)).toEqual({ ...where, status: "cancelled", run_id: queued.run_id, error_code: "cancelled", ended_by: "host", queued_ms: null, duration_ms: null, total_ms: ms, results_read: null, steered: null, cause: null });
  });

  it("a run lost over a restart is ended by the new instance, which logs it; then a run past its deadline times out", async () => {
    await bind("ended-lost", "ended-lost");
    const lost = await post("ended-lost", "hold");
    await untilCalled("ended-lost");
    await host.dispose();
    host = await start({ RUN_DEADLINE_MS: "1500", RUN_WATCHDOG_INTERVAL_MS: "1000" });
    expect(await waitForRunOn(host, lost.run_id, 15_000)).toMatchObject({ status: "failed", error: { code: "host.session_lost" } });
    expect(await endLineOf(lost.run_id)).toEqual({
      ...ranAt("ended-lost", "ended-lost", runner.runnerId("plain")),
      status: "failed",
      run_id: lost.run_id,
      error_code: "host.session_lost",
      ended_by: "host",
      // The instance that called its runner is gone, and what it knew with it.
      queued_ms: null,
      duration_ms: null,
      total_ms: ms,
      results_read: null,
      steered: null,
      cause: null,
    });

    await bind("ended-timeout", "ended-timeout");
    const late = await post("ended-timeout", "hold");
    expect(await waitForRunOn(host, late.run_id, 10_000)).toMatchObject({ status: "timeout" });
    const line = await endLineOf(late.run_id);
    expect(line).toMatchObject({ status: "timeout", error_code: "deadline_exceeded", ended_by: "run", queued_ms: ms, cause: null });
    expect(line.duration_ms).toBeGreaterThanOrEqual(1000);
  }, 40_000);

  it("each run has exactly one line, and no line carries a message, a runner's words, a token or a secret", async () => {
    // A moment for any second line to show.
    await new Promise((r) => setTimeout(r, 300));
    expect(made.map((runId) => [runId, runEndedLines(logs, runId).length])).toEqual(made.map((runId) => [runId, 1]));
    const lines = logs.split("\n").filter((l) => l.startsWith('{"log":"run.ended"'));
    expect(lines.length).toBeGreaterThanOrEqual(made.length);
    expect(tokens.length).toBeGreaterThan(0);
    for (const kept of [USER_TEXT, ANSWER, RUNNER_WORDS, SERVICE_SECRET, ADMIN_TOKEN, SECRETS_KEY, ...tokens]) expect(lines.filter((l) => l.includes(kept))).toEqual([]);
    for (const kept of [SERVICE_SECRET, ...tokens]) expect(logs).not.toContain(kept);
  });
});
