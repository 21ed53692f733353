import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi, deferred, uploadArtifact } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * README ("any call past the run's deadline: 408") and PROTOCOL §8 (the deadline is one of the checks, answered
 * `deadline_exceeded` 408): a runner that goes on past `ctx.runtime.deadline_at` while its run is still ending (its
 * end being recorded: the run is still `running`) is told its deadline passed, not that its token is invalid (401).
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const DEADLINE_MS = 1_500;
const seen = deferred<{ status: number; code?: string; upload: { status: number; code?: string }; runStatus: string }>();

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "pastdeadline",
    async onRun({ body }, res) {
      const ctx = body.context;
      resultWriter(res, ctx.run_id).send("message.delta", { chunk: { role: "assistant", content: "working" } });
      // Goes on a moment past its deadline, then calls the Host API.
      await new Promise((r) => setTimeout(r, Date.parse(ctx.runtime.deadline_at) - Date.now() + 300));
      const answer = await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "host.version");
      const upload = await uploadArtifact(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, new TextEncoder().encode("late"), { name: "late.txt" });
      const run = await host.admin("GET", `/v1/runs/${ctx.run_id}`);
      seen.resolve({ status: answer.status, code: answer.body.error?.code, upload: { status: upload.status, code: upload.body.error?.code }, runStatus: run.body.status });
    },
  });
  host = await startTestHost({ vars: { RUN_DEADLINE_MS: String(DEADLINE_MS) } });
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "pastdeadline" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

describe("a Host API call made past the run's deadline", () => {
  it("is answered 408 deadline_exceeded while the run is still ending, not 401 (calls and uploads)", async () => {
    // The timed-out run's end write is slow (the database is busy): the run is still `running` when the call comes.
    host.databaseOutage({ delayMs: 2_000, matching: "run exceeded its deadline" });
    const posted = await host.postEvent(messageEvent("past-deadline", "go"));
    const answer = await seen.promise;
    expect(answer.runStatus).toBe("running");
    expect({ status: answer.status, code: answer.code }).toEqual({ status: 408, code: "deadline_exceeded" });
    // artifact.upload answers as §8 too (README: uploads answer with AgentAPIError, 408 included).
    expect(answer.upload).toEqual({ status: 408, code: "deadline_exceeded" });
    const run = await host.waitForRun(posted.body.run_id!);
    expect([run.status, run.error?.code]).toEqual(["timeout", "deadline_exceeded"]);
  });
});
