import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { putAgent, startScriptedRunner } from "../support/scripted-runner";

/**
 * README "HTTP API": the Host API answers as PROTOCOL §8 says, `{"ok": false, "error": AgentAPIError}`, whatever
 * went wrong. A call whose hand-over to the run's Durable Object itself throws (the object reset or overloaded, or,
 * reproducible here, a body over the 32 MiB a Durable Object call carries, which an operator's MAX_API_BODY_BYTES
 * lets in) must still answer in that shape: a retryable 500 `runtime_error`, logged as a decision, not the admin
 * routes' `{"error": {"code": "internal"}}` a runner's client cannot read.
 */
const OVER_RPC_LIMIT = 33 * 1024 * 1024;

let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;

beforeAll(async () => {
  runner = await startScriptedRunner({ name: "object-fault" });
  host = await startTestHost({ vars: { MAX_API_BODY_BYTES: String(40 * 1024 * 1024) }, captureLogs: true });
  await runner.register(host);
  await putAgent(host, { agent_id: "object-fault", runner_id: runner.runnerId() });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

describe("a Host API call whose call into the run's Durable Object throws", () => {
  it("answers a retryable 500 runtime_error in the §8 shape, logs its decision, and the run goes on", async () => {
    const { result, runId } = await runner.run(host, "object-fault-1", async (api, ctx) => {
      const res = await fetch(`${ctx.runtime.api.base_url}/v1/runs/${ctx.run_id}/api`, {
        method: "POST",
        headers: { authorization: `Bearer ${ctx.runtime.api.token}`, "content-type": "application/json" },
        body: JSON.stringify({ action: "state.set", params: { scope: "conversation", key: "big", value: "x".repeat(OVER_RPC_LIMIT) } }),
      });
      const after = await api("host.version");
      return { status: res.status, type: res.headers.get("content-type"), body: await res.json(), after: after.status };
    });
    expect(result).toMatchObject({ status: 500, type: "application/json", after: 200 });
    expect(result.body).toEqual({ ok: false, error: { code: "runtime_error", message: expect.any(String), retryable: true, details: {} } });
    await expect.poll(() => host.decisions(runId).map((d) => [d.outcome, d.status])).toContainEqual(["runtime_error", 500]);
  }, 60_000);
});
