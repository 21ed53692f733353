/**
 * What users and runners store (state values, answers) is theirs, not the
 * operator's log's: a write that fails names what failed, never the values
 * it carried. The database fails exactly the write carrying the marker.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, runEndedLines, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { putAgent, startScriptedRunner } from "../support/scripted-runner";

let host: TestHost;
let scripted: Awaited<ReturnType<typeof startScriptedRunner>>;
let answering: Awaited<ReturnType<typeof startAdHocRunner>>;
let failing: Awaited<ReturnType<typeof startAdHocRunner>>;
const STATE_MARKER = "PRIVATE-state-updated-90aa1f";
const ANSWER_MARKER = "PRIVATE-answer-4b1d93";
const MIDRUN_MARKER = "PRIVATE-midrun-state-5e0c17";
const FAILURE_MARKER = "PRIVATE-runner-error-c3d9a2";

beforeAll(async () => {
  scripted = await startScriptedRunner({ name: "logs-scripted" });
  // Sends a state value and an answer, both carrying markers.
  answering = await startAdHocRunner({
    name: "logs-answer",
    async onRun({ body }, res) {
      const w = resultWriter(res, body.context.run_id);
      w.send("state.updated", { scope: "conversation", key: "note", value: STATE_MARKER });
      w.reply(`the answer is ${ANSWER_MARKER}`);
    },
  });
  // Fails its runs as runners do, in its own words (which may quote its users); or sends a state value, then its answer a moment later.
  failing = await startAdHocRunner({
    name: "logs-failing",
    async onRun({ body }, res) {
      const w = resultWriter(res, body.context.run_id);
      if (body.context.input.text === "mid-run") {
        w.send("state.updated", { scope: "conversation", key: "note", value: MIDRUN_MARKER });
        await new Promise((r) => setTimeout(r, 300));
        return w.reply("done");
      }
      w.send("run.failed", { code: "tests.upstream_down", error: `could not answer ${FAILURE_MARKER}`, retryable: false });
      res.end();
    },
  });
  host = await startTestHost({ captureLogs: true });
  await scripted.register(host);
  await putAgent(host, { agent_id: "scripted", runner_id: scripted.runnerId(), scope: { type: "global" } });
  await host.bind({ baseUrl: answering.url, runnerId: answering.runnerId(), agentId: "answering", scope: { type: "conversation", id: "logs-answer" } });
  await host.bind({ baseUrl: failing.url, runnerId: failing.runnerId(), agentId: "failing", scope: { type: "conversation", id: "logs-failing" } });
});
afterAll(async () => {
  await host?.dispose();
  await scripted?.close();
  await answering?.close();
  await failing?.close();
});

describe("user data in log lines", () => {
  it("never logs a value whose state.set failed to be stored, nor answers it", async () => {
    const marker = "PRIVATE-state-set-7c2e55";
    const { result, runId } = await scripted.run(host, "logs-state", async (api) => {
      host.databaseOutage({ queries: 1, matching: marker });
      return api("state.set", { scope: "conversation", key: "secret", value: { note: marker } });
    });
    expect(result).toMatchObject({ status: 500, body: { ok: false, error: { code: "runtime_error" } } });
    expect(JSON.stringify(result.body)).not.toContain(marker);
    await expect.poll(() => host.logs()).toContain(`run ${runId}: state.set failed in the host`);
    expect(host.logs()).not.toContain(marker);
  });

  it("logs a failure's reason (the database's own words) as one line, however many lines it has", async () => {
    const marker = "PRIVATE-state-set-3b8f21";
    const { result, runId } = await scripted.run(host, "logs-reason", async (api) => {
      host.databaseOutage({ queries: 1, matching: marker, reason: "disk I/O error\nrun run_forged: completed" });
      return api("state.set", { scope: "conversation", key: "secret", value: { note: marker } });
    });
    expect(result).toMatchObject({ status: 500, body: { ok: false, error: { code: "runtime_error" } } });
    await expect.poll(() => host.logs()).toContain(`run ${runId}: state.set failed in the host`);
    const line = host.logs().split("\n").find((l) => l.startsWith(`run ${runId}: state.set failed in the host`));
    expect(line).toContain("disk I/O error\\nrun run_forged: completed");
    expect(host.logs()).not.toMatch(/^run run_forged/m);
  });

  for (const [what, marker] of [["state value", STATE_MARKER], ["answer", ANSWER_MARKER]] as const) {
    it(`never logs a runner's ${what} whose write failed`, async () => {
      // Refused on each try (a run's write is tried four times).
      host.databaseOutage({ queries: 4, matching: marker });
      const posted = await host.postEvent(messageEvent("logs-answer", "hello"));
      const run = await host.waitForRun(posted.body.run_id!);
      // The host could not keep the run's facts: the run fails, saying so without the data.
      expect(run).toMatchObject({ status: "failed", error: { code: "host.internal_error" } });
      await expect.poll(() => runEndedLines(host.logs(), run.run_id)).toEqual([expect.objectContaining({ status: "failed", error_code: "host.internal_error", agent_id: "answering" })]);
      expect(host.logs()).not.toContain(marker);
      expect(JSON.stringify(run)).not.toContain(marker);
    });
  }

  it("logs a run its runner failed as one line with its code and where it ran, not the runner's words", async () => {
    const posted = await host.postEvent(messageEvent("logs-failing", "fail"));
    const run = await host.waitForRun(posted.body.run_id!);
    expect(run).toMatchObject({ status: "failed", error: { code: "tests.upstream_down" } });
    const where = { status: "failed", error_code: "tests.upstream_down", agent_id: "failing", runner_id: failing.runnerId(), conversation_id: "logs-failing", cause: null };
    await expect.poll(() => runEndedLines(host.logs(), run.run_id)).toEqual([expect.objectContaining(where)]);
    expect(host.logs()).not.toContain(FAILURE_MARKER);
  });

  it("logs a run the host failed mid-run with why, which its record does not say, never the data", async () => {
    // The state value's batch is refused on each try (four); the run's end, written after, is not.
    host.databaseOutage({ queries: 4, matching: MIDRUN_MARKER });
    const posted = await host.postEvent(messageEvent("logs-failing", "mid-run"));
    const run = await host.waitForRun(posted.body.run_id!, 20_000);
    expect(run).toMatchObject({ status: "failed", error: { code: "host.internal_error", message: "the host failed while running" } });
    await expect.poll(() => runEndedLines(host.logs(), run.run_id)).toEqual([expect.objectContaining({ status: "failed", error_code: "host.internal_error", agent_id: "failing", cause: expect.stringMatching(/database unavailable \(outage drill\)/) })]);
    expect(host.logs()).not.toContain(MIDRUN_MARKER);
  }, 25_000);
});
