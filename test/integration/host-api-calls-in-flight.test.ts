import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { listenLoopback, readBody, sendJson } from "../support/http-server";
import { startTestHost, type TestHost } from "../support/host";
import { startScriptedRunner } from "../support/scripted-runner";

/**
 * A run has at most MAX_API_CALLS_IN_FLIGHT Host API calls in flight; one more is answered 429 `rate_limited`
 * (retryable) at once, so a runner firing calls without bound cannot make its conversation's object hold a body and
 * an upstream answer for each. Calls answered free their places.
 */
const LIMIT = 3;
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
let tool: Awaited<ReturnType<typeof listenLoopback>>;
const release = deferred<void>();
let arrived = 0;
const allArrived = deferred<void>();

beforeAll(async () => {
  tool = await listenLoopback(async (req, res) => {
    await readBody(req);
    if (++arrived === LIMIT) allArrived.resolve();
    await release.promise;
    sendJson(res, 200, { ok: true });
  });
  runner = await startScriptedRunner({ name: "inflight", runners: [{ name: "default", label: { en_US: "i" }, permissions: { tools: ["call"], history: ["page"] } }] });
  host = await startTestHost({ vars: { MAX_API_CALLS_IN_FLIGHT: String(LIMIT) } });
  expect((await host.admin("POST", "/v1/admin/tools", { name: "held", endpoint: `${tool.url}/held` })).status).toBe(201);
  await runner.register(host);
  const agent = await host.admin("POST", "/v1/admin/agents", {
    agent_id: "inflight", name: "i", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "global" }, resource_policy: { tools: ["held"] },
  });
  expect(agent.status).toBe(201);
});
afterAll(async () => {
  release.resolve();
  await host?.dispose();
  await Promise.all([runner?.close(), tool?.close()]);
});

describe("Host API calls in flight per run", () => {
  it("past the limit are refused 429 rate_limited at once, and those answered free their places", async () => {
    const { result } = await runner.run(host, "inflight", async (api) => {
      const held = Array.from({ length: LIMIT }, () => api("tool.call", { tool_name: "held", parameters: {} }));
      await allArrived.promise;
      const refused = await api("history.page", { limit: 1 });
      release.resolve();
      const answered = await Promise.all(held);
      const after = await api("history.page", { limit: 1 });
      return { refused, answered: answered.map((r) => r.status), after: after.status };
    });
    expect(result.refused.status).toBe(429);
    expect(result.refused.body.error).toMatchObject({ code: "rate_limited", retryable: true, details: { limit: LIMIT } });
    expect(result.answered).toEqual(Array(LIMIT).fill(200));
    expect(result.after).toBe(200);
  });
});
