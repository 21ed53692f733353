import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listenLoopback, readBody } from "../support/http-server";
import { startTestHost, type TestHost } from "../support/host";
import { runLedger, startScriptedRunner } from "../support/scripted-runner";

/**
 * README: "provider failure: 502"; "a failure of the host's own (its database) during a resource call is the
 * retryable 500 of any Host API call". An HTTP tool (no secret headers) answering JSON nested 20,000 levels deep
 * (40 KB) makes the host overflow its stack serialising the answer: the runner is told the host failed and that
 * the call "may be tried again" (500, retryable), so it calls the tool (with its side effects) again, forever.
 * The tool's unusable answer is the tool's failure: 502, as any answer the host cannot use.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
let tool: Awaited<ReturnType<typeof listenLoopback>>;
let calls = 0;
const DEPTH = 20_000;

beforeAll(async () => {
  tool = await listenLoopback(async (req, res) => {
    await readBody(req);
    calls++;
    res.writeHead(200, { "content-type": "application/json" });
    res.end(`{"tree":${"[".repeat(DEPTH)}${"]".repeat(DEPTH)}}`);
  });
  runner = await startScriptedRunner({ name: "deep-answer", runners: [{ name: "default", label: { en_US: "d" }, permissions: { tools: ["detail", "call"] } }] });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/tools", { name: "tree", endpoint: `${tool.url}/tree` })).status).toBe(201);
  await runner.register(host);
  const agent = await host.admin("POST", "/v1/admin/agents", {
    agent_id: "d", name: "d", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "global" }, resource_policy: { tools: ["tree"] },
  });
  expect(agent.status).toBe(201);
});
afterAll(async () => {
  await host?.dispose();
  await Promise.all([runner?.close(), tool?.close()]);
});

describe("an HTTP tool answering JSON nested deeper than the host can carry", () => {
  it("is the tool's failure (502, code runtime_error), not the host's retryable 500", async () => {
    const { result, runId } = await runner.run(host, "deep", async (api) => {
      const r = await api("tool.call", { tool_name: "tree", parameters: {} });
      return { status: r.status, error: r.body.error };
    });
    expect(calls).toBe(1);
    expect(result.status).toBe(502);
    expect(result.error.code).toBe("runtime_error");
    expect(result.error.message).not.toMatch(/host failed/);
    const completed = (await runLedger(host, runId)).filter((e) => e.type === "tool.call.completed");
    expect(completed).toHaveLength(1);
    expect(completed[0]!.data.error.code).toBe("runtime_error");
  });
});
