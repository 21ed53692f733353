import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { listenLoopback, readBody, sendJson } from "../support/http-server";
import { startTestHost, type TestHost } from "../support/host";
import { runLedger, startScriptedRunner } from "../support/scripted-runner";

/**
 * A run has at most MAX_API_CALLS_IN_FLIGHT Host API calls in flight; one more is answered 429 `rate_limited`
 * (retryable) at once, so a runner firing calls without bound cannot make its conversation's object hold a body and
 * an upstream answer for each. Calls answered free their places. Upstream answers held at once are bounded too
 * (RESOURCE_RESPONSE_BUDGET_BYTES), so a few calls reading large answers cannot exhaust the object's memory: an MCP
 * server's answers as well as an HTTP tool's, each counted against the call it answers though a run's calls to a
 * server share one session.
 */
const LIMIT = 3;
const BUDGET = 64 * 1024;
/** Sent by the `half` tool before it waits: two such answers held at once cross the budget. */
const HALF = 40 * 1024;
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
let tool: Awaited<ReturnType<typeof listenLoopback>>;
const release = deferred<void>();
let arrived = 0;
const allArrived = deferred<void>();
const finishHalves = deferred<void>();
const finishMcpHalves = deferred<void>();
/** Answers the MCP server began (an event stream each) and the JSON-RPC ids they answer; how many the host let go unfinished. */
const mcpHalvesBegun: unknown[] = [];
let mcpHalvesLetGo = 0;
let mcpInitializes = 0;

/** A stateless MCP server (raw, for control of each answer's bytes) whose tool `half` answers as `/half` does. */
function mcpServer(raw: string, res: import("node:http").ServerResponse): void {
  const msg = JSON.parse(raw);
  if (msg.id === undefined) return void res.writeHead(202).end();
  if (msg.method === "initialize") {
    mcpInitializes++;
    return sendJson(res, 200, { jsonrpc: "2.0", id: msg.id, result: { protocolVersion: msg.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: "m", version: "1" } } });
  }
  if (msg.method === "tools/list") return sendJson(res, 200, { jsonrpc: "2.0", id: msg.id, result: { tools: [{ name: "half", inputSchema: { type: "object" } }] } });
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  res.write(`event: message\ndata: {"jsonrpc":"2.0","id":${JSON.stringify(msg.id)},"result":{"content":[{"type":"text","text":"${"x".repeat(HALF)}`);
  mcpHalvesBegun.push(msg.id);
  let finished = false;
  res.on("close", () => void (finished || mcpHalvesLetGo++));
  void finishMcpHalves.promise.then(() => {
    finished = true;
    res.end('"}]}}\n\n');
  });
}

beforeAll(async () => {
  tool = await listenLoopback(async (req, res) => {
    const sent = await readBody(req);
    if (req.url === "/mcp") return req.method === "POST" ? mcpServer(sent, res) : void res.writeHead(405).end();
    // A provider (`{tool.url}/v1`): the model `junk` answers HALF bytes that are not JSON (a provider fault), `big` a completion as large.
    if (req.url === "/v1/chat/completions") {
      if (JSON.parse(sent).model === "junk") return void res.writeHead(200, { "content-type": "application/json" }).end("x".repeat(HALF));
      return sendJson(res, 200, { choices: [{ message: { role: "assistant", content: "y".repeat(HALF) }, finish_reason: "stop" }] });
    }
    if (req.url === "/half") {
      res.writeHead(200, { "content-type": "application/json" });
      res.write(`{"blob": "${"x".repeat(HALF)}`);
      await finishHalves.promise;
      return void res.end('"}');
    }
    if (++arrived === LIMIT) allArrived.resolve();
    await release.promise;
    sendJson(res, 200, { ok: true });
  });
  runner = await startScriptedRunner({ name: "inflight", runners: [{ name: "default", label: { en_US: "i" }, permissions: { tools: ["call"], history: ["page"], models: ["invoke"] } }] });
  host = await startTestHost({ vars: { MAX_API_CALLS_IN_FLIGHT: String(LIMIT), RESOURCE_RESPONSE_MAX_BYTES: String(BUDGET), RESOURCE_RESPONSE_BUDGET_BYTES: String(BUDGET) } });
  expect((await host.admin("POST", "/v1/admin/tools", { name: "held", endpoint: `${tool.url}/held` })).status).toBe(201);
  expect((await host.admin("POST", "/v1/admin/tools", { name: "half", endpoint: `${tool.url}/half` })).status).toBe(201);
  expect((await host.admin("POST", "/v1/admin/mcp-servers", { name: "m", url: `${tool.url}/mcp` })).status).toBe(201);
  for (const model of ["junk", "big"]) {
    expect((await host.admin("POST", "/v1/admin/models", { model_id: model, name: model, kind: "llm", base_url: `${tool.url}/v1`, api_key: "sk-budget", model })).status).toBe(201);
  }
  await runner.register(host);
  const agent = await host.admin("POST", "/v1/admin/agents", {
    agent_id: "inflight", name: "i", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "global" }, resource_policy: { tools: ["held", "half", "m.half"], models: ["junk", "big"], fallback_models: ["big"] },
  });
  expect(agent.status).toBe(201);
});
afterAll(async () => {
  release.resolve();
  finishHalves.resolve();
  finishMcpHalves.resolve();
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

  it("holding answers past RESOURCE_RESPONSE_BUDGET_BYTES at once: the call whose answer crosses it is refused 429 (retryable) and recorded", async () => {
    const { result, runId } = await runner.run(host, "budget", async (api) => {
      const calls = [api("tool.call", { tool_name: "half", parameters: {} }), api("tool.call", { tool_name: "half", parameters: {} })];
      // Neither answer can finish before the test lets it: only a refusal settles a call now.
      const first = await Promise.race([...calls, new Promise((r) => setTimeout(r, 4_000, "none settled"))]);
      finishHalves.resolve();
      return { first, statuses: (await Promise.all(calls)).map((r) => r.status).sort() };
    });
    expect(result.first).toMatchObject({ status: 429, body: { error: { code: "rate_limited", retryable: true, details: { limit: BUDGET } } } });
    expect(result.statuses).toEqual([200, 429]);
    const completed = (await runLedger(host, runId)).filter((e) => e.type === "tool.call.completed").map((e) => e.data.error?.code ?? "ok");
    expect(completed.sort()).toEqual(["ok", "rate_limited"]);
  });

  it("an MCP server's answers count too, each against its own call on the run's one session: the one crossing the budget is refused, the other completes, the session is kept", async () => {
    const initializesBefore = mcpInitializes;
    const { result, runId } = await runner.run(host, "budget-mcp", async (api) => {
      const calls = [api("tool.call", { tool_name: "m.half", parameters: {} }), api("tool.call", { tool_name: "m.half", parameters: {} })];
      // Neither answer can finish before the test lets it: only a refusal settles a call now.
      const first = await Promise.race([...calls, new Promise((r) => setTimeout(r, 4_000, "none settled"))]);
      // The refused answer's body is cancelled: its connection closes while the server still sends.
      for (const until = Date.now() + 3_000; mcpHalvesLetGo === 0 && Date.now() < until; ) await new Promise((r) => setTimeout(r, 25));
      const letGo = mcpHalvesLetGo;
      finishMcpHalves.resolve();
      const answers = (await Promise.all(calls)).map((r) => [r.status, r.body.data?.result?.content?.[0]?.text?.length ?? r.body.error?.code]);
      // The refusal was the host's, not the server's fault: the next call goes on the same session.
      const next = await api("tool.call", { tool_name: "m.half", parameters: {} });
      return { first, letGo, answers, next: next.status };
    });
    expect(result.next).toBe(200);
    expect(mcpInitializes - initializesBefore).toBe(1);
    expect(mcpHalvesBegun).toHaveLength(3);
    expect(result.letGo).toBe(1);
    expect(result.first).toMatchObject({ status: 429, body: { error: { code: "rate_limited", retryable: true, details: { limit: BUDGET } } } });
    expect(result.answers.sort()).toEqual([[200, HALF], [429, "rate_limited"]]);
    const completed = (await runLedger(host, runId)).filter((e) => e.type === "tool.call.completed").map((e) => e.data.error?.code ?? "ok");
    expect(completed.sort()).toEqual(["ok", "ok", "rate_limited"]);
  });

  it("a fallback's answer is not refused for the answer of the attempt that failed before it: only the answer being read is held", async () => {
    const { result, runId } = await runner.run(host, "budget-fallback", async (api) => api("model.invoke", { model_id: "junk", messages: [{ role: "user", content: "hi" }] }));
    expect([result.status, result.body.data?.model_id, result.body.data?.message.content.length]).toEqual([200, "big", HALF]);
    expect((await runLedger(host, runId)).find((e) => e.type === "model.fallback")?.data).toMatchObject({ model_id: "junk", next_model_id: "big" });
  });
});
