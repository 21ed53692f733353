import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listenLoopback, readBody } from "../support/http-server";
import { startTestHost, type TestHost } from "../support/host";
import { runLedger, startScriptedRunner } from "../support/scripted-runner";

/**
 * Upstreams that refuse (5xx, 429) in hostile ways. One never finishes the body of its refusal: the host reads that
 * body only for the start of its message, so the call's own bound still ends it, and says why it ended (the tool's
 * timeout, a 408), never a refusal the host did not read to its end, told as if the upstream had answered. Another
 * asks to be left alone for longer than any number holds: no wait is passed on, rather than a `null` one.
 */

const TOOL_TIMEOUT_MS = 800;
const MODEL_ATTEMPT_MS = 800;

let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
let tool: Awaited<ReturnType<typeof listenLoopback>>;
let hangingUp = 0;

beforeAll(async () => {
  tool = await listenLoopback(async (req, res) => {
    await readBody(req);
    if (req.url?.endsWith("/chat/completions")) {
      // A model answering 200 as plain text, not an event stream, whose body never ends.
      res.writeHead(200, { "content-type": "text/plain" });
      res.write("warming up");
      const ticker = setInterval(() => res.write("."), 100);
      res.on("close", () => clearInterval(ticker));
      return;
    }
    if (req.url === "/forever" || req.url === "/eons") {
      // Past any number, or a number past any whole one a runner's integer can hold (1e20 s: 1e+23 ms).
      res.writeHead(429, { "content-type": "application/json", "retry-after": req.url === "/forever" ? "9".repeat(400) : `1${"0".repeat(20)}` });
      res.end('{"error":"come back never"}');
      return;
    }
    // Headers and the start of its error at once, then a byte now and then, forever.
    res.writeHead(503, { "content-type": "application/json", "retry-after": "1" });
    res.write('{"error":"busy');
    const ticker = setInterval(() => res.write(" "), 100);
    res.on("close", () => {
      clearInterval(ticker);
      hangingUp++;
    });
  });
  runner = await startScriptedRunner({ name: "stalled-error", runners: [{ name: "default", label: { en_US: "s" }, permissions: { tools: ["detail", "call"], models: ["invoke", "stream"] } }] });
  host = await startTestHost({ vars: { TOOL_CALL_TIMEOUT_MS: String(TOOL_TIMEOUT_MS), MODEL_ATTEMPT_TIMEOUT_MS: String(MODEL_ATTEMPT_MS) } });
  const model = await host.admin("POST", "/v1/admin/models", { model_id: "plain", name: "plain", kind: "llm", base_url: `${tool.url}/v1`, api_key: "sk-hostile-0123456789abcdef", model: "plain" });
  if (model.status !== 201) throw new Error(JSON.stringify(model.body));
  for (const [name, path] of [["sulky", "/sulk"], ["throttled", "/forever"], ["eons", "/eons"]]) {
    const r = await host.admin("POST", "/v1/admin/tools", { name, endpoint: `${tool.url}${path}` });
    if (r.status !== 201) throw new Error(JSON.stringify(r.body));
  }
  await runner.register(host);
  const agent = await host.admin("POST", "/v1/admin/agents", {
    agent_id: "s", name: "s", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "global" }, resource_policy: { tools: ["sulky", "throttled", "eons"], models: ["plain"] },
  });
  if (agent.status !== 201) throw new Error(JSON.stringify(agent.body));
});
afterAll(async () => {
  await host?.dispose();
  await Promise.all([runner?.close(), tool?.close()]);
});

describe("a tool whose error body never ends", () => {
  it("is a timeout (408) at TOOL_CALL_TIMEOUT_MS, recorded so, and the tool is let go", async () => {
    const before = hangingUp;
    const startedAt = Date.now();
    const { result, runId } = await runner.run(host, "stalled-error", async (api) => api("tool.call", { tool_name: "sulky", parameters: {} }));
    expect(Date.now() - startedAt).toBeLessThan(TOOL_TIMEOUT_MS + 4000);
    expect(result.status).toBe(408);
    expect(result.body.error.code).toBe("deadline_exceeded");
    expect(result.body.error.message).toMatch(/did not answer within/);
    const completed = (await runLedger(host, runId)).find((e) => e.type === "tool.call.completed");
    expect(completed?.data.error.code).toBe("deadline_exceeded");
    await expect.poll(() => hangingUp - before).toBeGreaterThan(0);
  });
});

describe("a tool whose Retry-After is past any number, or past any whole one", () => {
  it.each(["throttled", "eons"])("is a retryable 502 naming its status, with no retry_after_ms rather than a null or 1e+23 one (%s)", async (tool) => {
    const { result } = await runner.run(host, tool, async (api) => api("tool.call", { tool_name: tool, parameters: {} }));
    expect(result.status).toBe(502);
    expect(result.body.error.retryable).toBe(true);
    expect(result.body.error.details.upstream_status).toBe(429);
    expect(result.body.error.details).not.toHaveProperty("retry_after_ms");
  });
});

describe("a model whose answer is no event stream and never ends", () => {
  it("is the attempt's timeout, not an answer the host never read to its end told as the wrong content type", async () => {
    const { result } = await runner.run(host, "plain-stalled", async (_api, _ctx, _emit, raw) => {
      const res = await raw("model.stream", { model_id: "plain", messages: [{ role: "user", content: "hi" }] });
      return { status: res.status, body: await res.text() };
    });
    expect(result.status).toBe(502);
    const error = JSON.parse(result.body).error;
    expect(error.message).toMatch(new RegExp(`did not answer within ${MODEL_ATTEMPT_MS} ms`));
    expect(error.message).not.toMatch(/instead of an event stream/);
  });
});
