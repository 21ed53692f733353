import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeRetrieval } from "../support/fake-retrieval";
import { callHostApi, deferred, rawUpload } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/** A call to a host-held resource without a timeout of its own still ends at the run's deadline. */

const DEADLINE_MS = 1_500;
let host: TestHost;
let retrieval: Awaited<ReturnType<typeof startFakeRetrieval>>;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const answered = deferred<{ status: number; body: any; afterMs: number }>();
const uploadAnswered = deferred<{ raw: string; afterMs: number }>();

beforeAll(async () => {
  retrieval = await startFakeRetrieval({ apiKey: "kb-deadline-key-7a1c" });
  runner = await startAdHocRunner({
    name: "deadline",
    runners: [{ name: "default", label: { en_US: "deadline" }, permissions: { knowledge_bases: ["retrieve"], artifacts: ["metadata", "read"] } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      const started = Date.now();
      if (ctx.input.text === "upload") {
        // Declares 100 bytes, sends 10, then neither sends more nor closes.
        const raw = await rawUpload(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, { declared: 100, body: "0123456789", end: false });
        uploadAnswered.resolve({ raw, afterMs: Date.now() - started });
        return w.reply("too late");
      }
      const answer = await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "knowledge.retrieve", { kb_id: "slow-kb", query: "hang" });
      answered.resolve({ ...answer, afterMs: Date.now() - started });
      w.reply("too late");
    },
  });
  host = await startTestHost({ vars: { RUN_DEADLINE_MS: String(DEADLINE_MS) } });
  await host.admin("POST", "/v1/admin/knowledge-bases", { kb_id: "slow-kb", name: "Slow", endpoint: retrieval.url, api_key: "kb-deadline-key-7a1c" });
  await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url });
  const agent = await host.admin("POST", "/v1/admin/agents", {
    agent_id: "deadline",
    name: "deadline",
    runner_id: runner.runnerId(),
    event_types: ["message.received"],
    resource_policy: { knowledge_bases: ["slow-kb"] },
  });
  if (agent.status !== 201) throw new Error(JSON.stringify(agent.body));
});
afterAll(async () => {
  await host?.dispose();
  await Promise.all([retrieval?.close(), runner?.close()]);
});

describe("run deadline", () => {
  it("ends an upstream call that outlives the run's deadline with 408, and records it", async () => {
    const posted = await host.postEvent(messageEvent("deadline", "retrieve"));
    const answer = await answered.promise;
    expect([answer.status, answer.body.error.code]).toEqual([408, "deadline_exceeded"]);
    expect(answer.afterMs).toBeLessThan(DEADLINE_MS + 1_000);
    const run = await host.waitForRun(posted.body.run_id!);
    expect(run.status).toBe("timeout");
    const ledger = (await host.admin("GET", `/v1/runs/${run.run_id}/events`)).body.items;
    expect(ledger.find((e: any) => e.type === "knowledge.failed")?.data).toMatchObject({ kb_id: "slow-kb", code: "deadline_exceeded" });
  });

  it("cuts an upload whose body is still arriving at the run's deadline with 408, and stores nothing", async () => {
    const posted = await host.postEvent(messageEvent("deadline-upload", "upload"));
    const answer = await uploadAnswered.promise;
    expect(answer.raw).toMatch(/^HTTP\/1\.1 408/);
    expect(answer.raw).toContain('"code":"deadline_exceeded"');
    expect(answer.afterMs).toBeLessThan(DEADLINE_MS + 1_000);
    expect((await host.waitForRun(posted.body.run_id!)).status).toBe("timeout");
    expect(await host.query("SELECT artifact_id FROM artifact WHERE run_id = ?", [posted.body.run_id])).toEqual([]);
    expect(await host.r2Keys("artifacts/")).toEqual([]);
  });
});
