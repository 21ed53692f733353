import { afterAll, beforeAll, expect, it } from "vitest";
import { callHostApi } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { startAdHocRunner } from "../support/runner";
import { startFakeTools } from "../support/fake-tool";

/**
 * PROTOCOL §7: a result whose sequence was seen is dropped as a duplicate, and the run goes on. A run.completed that
 * repeats the sequence of a result in the same chunk does not end the run, so it must not stop the runner's Host API
 * calls in flight, nor cut the runner's stream: the run still ends as its runner's real run.completed says.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
let tools: Awaited<ReturnType<typeof startFakeTools>>;
let toolAnswer: any = null;

beforeAll(async () => {
  tools = await startFakeTools({ bigBytes: 10 });
  runner = await startAdHocRunner({
    name: "dup-terminal",
    runners: [{ name: "default", label: { en_US: "d" }, capabilities: { streaming: true, tool_calling: true }, permissions: { tools: ["call"] } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const line = (type: string, data: unknown, sequence: number) => `${JSON.stringify({ run_id: ctx.run_id, type, data, sequence })}\n`;
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      const before = tools.calls.length;
      const call = callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "tool.call", { tool_name: "slow", parameters: {} });
      while (tools.calls.length === before) await new Promise((r) => setTimeout(r, 5));
      // One write, one chunk: the run.completed repeats sequence 1, so it is a duplicate, dropped.
      res.write(line("message.completed", { message: { role: "assistant", content: "interim" } }, 1) + line("run.completed", { finish_reason: "stop" }, 1));
      toolAnswer = await call;
      res.write(line("message.completed", { message: { role: "assistant", content: "final" } }, 2));
      res.write(line("run.completed", { finish_reason: "stop" }, 3));
      res.end();
    },
  });
  host = await startTestHost({ vars: { TOOL_CALL_TIMEOUT_MS: "700" } });
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
  expect((await host.admin("POST", "/v1/admin/tools", { name: "slow", description: "slow tool", endpoint: `${tools.url}/slow` })).status).toBe(201);
  expect((await host.admin("POST", "/v1/admin/agents", { agent_id: "dup", name: "dup", runner_id: runner.runnerId(), event_types: ["message.received"], resource_policy: { tools: ["slow"] } })).status).toBe(201);
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await tools?.close();
});

it("a duplicate run.completed in a chunk neither stops the run's tool call nor ends its stream", async () => {
  const posted = await host.postEvent(messageEvent("dup-terminal", "go"));
  const run = await host.waitForRun(posted.body.run_id!);
  expect({ status: run.status, error: (run as any).error ?? null }).toEqual({ status: "completed", error: null });
  // The tool call ended by its own timeout, not stopped as if the run had ended.
  expect(JSON.stringify(toolAnswer)).not.toContain("the run was stopped");
});
