import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeMcpServer } from "../support/fake-mcp";
import { HOLD_STREAM, startFakeProvider } from "../support/fake-provider";
import { startFakeRetrieval } from "../support/fake-retrieval";
import { startFakeTools } from "../support/fake-tool";
import { startTestHost, type TestHost } from "../support/host";
import { runLedger, startScriptedRunner } from "../support/scripted-runner";

/**
 * Host-held models, tools and knowledge bases (PROTOCOL §4, §6, §8): a runner
 * uses what its agent grants through the Host API, against fakes of the
 * outside world on loopback (an OpenAI-compatible provider, HTTP tools, an MCP
 * server, a retrieval endpoint), and never sees a credential.
 */

const secret = (label: string) => `${label}-${randomBytes(12).toString("hex")}`;
const SECRETS = {
  main: secret("sk-main"),
  backup: secret("sk-backup"),
  flaky: secret("sk-flaky"),
  private: secret("sk-private"),
  weather: secret("weather-key"),
  echo: secret("echo-key"),
  mcp: secret("mcp-token"),
  kb: secret("kb-key"),
  // Secrets that JSON escapes, and secrets in endpoint URLs.
  quoted: `quo"te\\${randomBytes(8).toString("hex")}`,
  kbQuoted: `kb"key\\${randomBytes(8).toString("hex")}`,
  urlKey: secret("url-key"),
  mcpPath: secret("mcpPath"),
  mcpQuery: secret("mcp-query"),
};
const INLINE_LIMIT = 2048;
const TOOL_TIMEOUT_MS = 400;

let host: TestHost;
let provider: Awaited<ReturnType<typeof startFakeProvider>>;
let tools: Awaited<ReturnType<typeof startFakeTools>>;
let mcp: Awaited<ReturnType<typeof startFakeMcpServer>>;
let retrieval: Awaited<ReturnType<typeof startFakeRetrieval>>;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;

/** Everything the host ever sent a runner: contexts and Host API answers (raw text). */
const seenByRunners: string[] = [];

type Api = (action: string, params?: Record<string, unknown>) => Promise<{ status: number; body: any }>;
interface RunTools {
  api: Api;
  /** The raw Host API response, for streaming actions. */
  raw: (action: string, params: Record<string, unknown>) => Promise<Response>;
  ctx: any;
}

/** Run `script` inside a run of `conversationId` and return what it returned. */
const inRun = <T = any>(conversationId: string, script: (t: RunTools) => Promise<unknown>) =>
  runner.run<T>(host, conversationId, (api, ctx, _emit, raw) => script({ api, raw, ctx }));
const ledger = (runId: string) => runLedger(host, runId);

/** NDJSON lines of a streaming answer, as they arrive. */
async function* ndjson(res: Response): AsyncGenerator<any> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let nl: number;
    while ((nl = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      seenByRunners.push(line);
      if (line.trim()) yield JSON.parse(line);
    }
  }
}

async function register(path: string, body: unknown) {
  const res = await host.admin("POST", path, body);
  if (res.status !== 201) throw new Error(`POST ${path}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

const WEATHER_PARAMS = {
  type: "object",
  properties: { city: { type: "string", minLength: 2 }, days: { type: "integer", minimum: 1, maximum: 7 } },
  required: ["city"],
  additionalProperties: false,
};

beforeAll(async () => {
  provider = await startFakeProvider({
    keys: { "gpt-main": SECRETS.main, "rr-1": SECRETS.main, "gpt-backup": SECRETS.backup, "gpt-flaky": SECRETS.flaky, "gpt-private": SECRETS.private },
    failing: ["gpt-flaky"],
  });
  tools = await startFakeTools({ bigBytes: 4 * INLINE_LIMIT });
  mcp = await startFakeMcpServer({ token: SECRETS.mcp });
  retrieval = await startFakeRetrieval({ apiKey: [SECRETS.kb, SECRETS.kbQuoted] });
  runner = await startScriptedRunner({
    name: "resources",
    runners: [
      {
        name: "default",
        label: { en_US: "resources" },
        capabilities: { streaming: true, tool_calling: true, knowledge_retrieval: true },
        permissions: { models: ["invoke", "stream", "rerank"], tools: ["detail", "call"], knowledge_bases: ["list", "retrieve"], events: ["get", "page"] },
      },
    ],
    observe: (text) => seenByRunners.push(text),
  });

  host = await startTestHost({ captureLogs: true, vars: { TOOL_RESULT_INLINE_MAX_BYTES: String(INLINE_LIMIT), TOOL_CALL_TIMEOUT_MS: String(TOOL_TIMEOUT_MS) } });
  const llm = (model_id: string, model: string, api_key: string) => register("/v1/admin/models", { model_id, name: model_id, kind: "llm", base_url: provider.baseUrl, api_key, model, context_window: 8192 });
  await llm("chat", "gpt-main", SECRETS.main);
  await llm("backup", "gpt-backup", SECRETS.backup);
  await llm("flaky", "gpt-flaky", SECRETS.flaky);
  await llm("private", "gpt-private", SECRETS.private);
  await register("/v1/admin/models", { model_id: "reranker", name: "reranker", kind: "rerank", base_url: provider.baseUrl, api_key: SECRETS.main, model: "rr-1" });
  const tool = (name: string, path: string, extra: Record<string, unknown> = {}) => register("/v1/admin/tools", { name, description: `${name} tool`, endpoint: `${tools.url}${path}`, ...extra });
  await tool("weather", "/weather", { parameters: WEATHER_PARAMS, headers: { "x-api-key": SECRETS.weather } });
  await tool("big", "/big");
  await tool("slow", "/slow");
  await tool("echo_auth", "/echo-auth", { headers: { "x-api-key": SECRETS.echo } });
  await tool("ungranted", "/weather");
  await tool("echo_quote", "/echo-auth", { headers: { "x-api-key": SECRETS.quoted } });
  await tool("echo_url", `/echo-url?key=${SECRETS.urlKey}&lang=en`);
  await register("/v1/admin/mcp-servers", { name: "calc", url: mcp.url, headers: { authorization: `Bearer ${SECRETS.mcp}` } });
  await register("/v1/admin/mcp-servers", { name: "keyed", url: `${mcp.url}/${SECRETS.mcpPath}?access_token=${SECRETS.mcpQuery}`, headers: { authorization: `Bearer ${SECRETS.mcp}` } });
  await register("/v1/admin/knowledge-bases", { kb_id: "docs", name: "Docs", description: "product docs", endpoint: retrieval.url, api_key: SECRETS.kb });
  await register("/v1/admin/knowledge-bases", { kb_id: "private-kb", name: "Private", endpoint: retrieval.url, api_key: SECRETS.kb });
  await register("/v1/admin/knowledge-bases", { kb_id: "quoted-kb", name: "Quoted", endpoint: retrieval.url, api_key: SECRETS.kbQuoted });
  await register("/v1/admin/runner-services", { base_url: runner.url });

  const agent = (agent_id: string, scope: Record<string, unknown>, resource_policy: Record<string, unknown>) =>
    register("/v1/admin/agents", { agent_id, name: agent_id, runner_id: runner.runnerId(), event_types: ["message.received"], scope, resource_policy });
  await agent("full", { type: "global" }, {
    models: ["chat", "flaky", "reranker"],
    fallback_models: ["backup"],
    tools: ["weather", "big", "slow", "echo_auth", "calc.add", "calc.shout"],
    knowledge_bases: ["docs"],
  });
  // Narrowed by `allow` and with no fallback: what the manifest asks for is an upper bound only.
  await agent("narrow", { type: "conversation", id: "narrow" }, {
    allow: { models: ["invoke"], tools: ["detail"] },
    models: ["flaky", "chat"],
    tools: ["weather"],
  });
  // Upstreams that echo what they were sent.
  await agent("careless", { type: "conversation", id: "careless" }, { tools: ["echo_quote", "echo_url", "keyed.shout"], knowledge_bases: ["quoted-kb"] });
});

afterAll(async () => {
  await host?.dispose();
  await Promise.all([runner?.close(), provider?.close(), tools?.close(), mcp?.close(), retrieval?.close()]);
});

describe("ctx.resources", () => {
  it("lists exactly the effective grants, with their operations", async () => {
    const { result: full } = await inRun("grants-full", async ({ ctx }) => ctx.resources);
    expect(full.models).toEqual([
      { model_id: "chat", name: "chat", kind: "llm", context_window: 8192, operations: ["invoke", "stream"] },
      { model_id: "flaky", name: "flaky", kind: "llm", context_window: 8192, operations: ["invoke", "stream"] },
      { model_id: "reranker", name: "reranker", kind: "rerank", context_window: null, operations: ["rerank"] },
      { model_id: "backup", name: "backup", kind: "llm", context_window: 8192, operations: ["invoke", "stream"] },
    ]);
    expect(full.tools.map((t: any) => t.tool_name)).toEqual(["weather", "big", "slow", "echo_auth", "calc.add", "calc.shout"]);
    expect(full.tools[0]).toEqual({ tool_name: "weather", description: "weather tool", parameters: WEATHER_PARAMS, operations: ["detail", "call"] });
    expect(full.tools.find((t: any) => t.tool_name === "calc.add")).toMatchObject({ description: "Add two numbers", parameters: { type: "object", required: ["a", "b"] } });
    expect(full.knowledge_bases).toEqual([{ kb_id: "docs", name: "Docs", description: "product docs", operations: ["list", "retrieve"] }]);

    const { result: narrow } = await inRun("narrow", async ({ ctx }) => ctx.resources);
    expect(narrow.models.map((m: any) => [m.model_id, m.operations])).toEqual([["flaky", ["invoke"]], ["chat", ["invoke"]]]);
    expect(narrow.tools.map((t: any) => [t.tool_name, t.operations])).toEqual([["weather", ["detail"]]]);
    expect(narrow.knowledge_bases).toEqual([]);
  });
});

describe("models", () => {
  it("invokes a model: one message back (tool calls included), the provider's usage in the ledger", async () => {
    const { result, runId } = await inRun("invoke", async ({ api }) => ({
      plain: await api("model.invoke", { model_id: "chat", messages: [{ role: "user", content: "hi" }], extra: { temperature: 0.2, model: "not-overridable" } }),
      tools: await api("model.invoke", { model_id: "chat", messages: [{ role: "user", content: "weather?" }], tools: [{ name: "weather", description: "forecast", parameters: WEATHER_PARAMS }] }),
    }));
    expect(result.plain).toEqual({
      status: 200,
      body: { ok: true, data: { model_id: "chat", message: { role: "assistant", content: "gpt-main says: hi" }, finish_reason: "stop", usage: { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 } } },
    });
    expect(result.tools.body.data).toMatchObject({
      model_id: "chat",
      finish_reason: "tool_calls",
      message: { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "weather", arguments: '{"city":"Oslo"}' } }] },
    });
    // The host called the provider with the operator's key and model name, and the runner's extras.
    const sent = provider.calls.filter((c) => c.body.messages?.[0]?.content === "hi");
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({ path: "/v1/chat/completions", authorization: `Bearer ${SECRETS.main}`, body: { model: "gpt-main", temperature: 0.2, stream: false } });
    expect(provider.calls.find((c) => c.body.messages?.[0]?.content === "weather?")?.body.tools[0]).toMatchObject({ type: "function", function: { name: "weather" } });

    const usage = (await ledger(runId)).filter((e) => e.type === "model.usage");
    expect(usage).toHaveLength(2);
    expect(usage[0]).toMatchObject({ origin: "host", data: { model_id: "chat", operation: "invoke", prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 } });
  });

  it("streams NDJSON chunks as the provider produces them: the first reaches the runner before the provider finishes", async () => {
    const { result, runId } = await inRun("stream", async ({ raw }) => {
      const res = await raw("model.stream", { model_id: "chat", messages: [{ role: "user", content: HOLD_STREAM }] });
      const lines: any[] = [];
      let finishedAtFirstDelta: number | undefined;
      const finishedBefore = provider.state.streamsFinished;
      for await (const line of ndjson(res)) {
        if (line.type === "delta" && finishedAtFirstDelta === undefined) {
          finishedAtFirstDelta = provider.state.streamsFinished;
          provider.releaseStream(); // the provider only finishes once the runner has seen a chunk
        }
        lines.push(line);
      }
      return { status: res.status, contentType: res.headers.get("content-type"), lines, providerFinishedAtFirstDelta: finishedAtFirstDelta! > finishedBefore };
    });
    expect(result.status).toBe(200);
    expect(result.contentType).toContain("application/x-ndjson");
    expect(result.providerFinishedAtFirstDelta).toBe(false);
    expect(result.lines.slice(0, -1)).toEqual([
      { type: "delta", chunk: { role: "assistant", content: "Hel" } },
      { type: "delta", chunk: { role: "assistant", content: "lo" } },
      { type: "delta", chunk: { role: "assistant", content: " from gpt-main" } },
    ]);
    expect(result.lines.at(-1)).toEqual({
      type: "completed",
      model_id: "chat",
      message: { role: "assistant", content: "Hello from gpt-main" },
      finish_reason: "stop",
      usage: { prompt_tokens: 9, completion_tokens: 3, total_tokens: 12 },
    });
    expect(provider.calls.find((c) => c.body.messages?.[0]?.content === HOLD_STREAM)?.body).toMatchObject({ stream: true, stream_options: { include_usage: true } });
    expect((await ledger(runId)).find((e) => e.type === "model.usage")?.data).toMatchObject({ model_id: "chat", operation: "stream", total_tokens: 12 });
  });

  it("falls back to the next granted model when the provider fails, for invoke and stream", async () => {
    const { result, runId } = await inRun("fallback", async ({ api, raw }) => {
      const invoke = await api("model.invoke", { model_id: "flaky", messages: [{ role: "user", content: "fall back" }] });
      const lines = [];
      for await (const line of ndjson(await raw("model.stream", { model_id: "flaky", messages: [{ role: "user", content: "stream fall back" }] }))) lines.push(line);
      return { invoke, last: lines.at(-1) };
    });
    expect(result.invoke.status).toBe(200);
    expect(result.invoke.body.data).toMatchObject({ model_id: "backup", message: { content: "gpt-backup says: fall back" } });
    expect(result.last).toMatchObject({ type: "completed", model_id: "backup", message: { content: "Hello from gpt-backup" } });
    // The failing provider was tried first, each time.
    const tried = provider.calls.filter((c) => String(c.body.messages?.[0]?.content).includes("fall back")).map((c) => c.body.model);
    expect(tried).toEqual(["gpt-flaky", "gpt-backup", "gpt-flaky", "gpt-backup"]);

    const entries = await ledger(runId);
    const fallbacks = entries.filter((e) => e.type === "model.fallback");
    expect(fallbacks.map((e) => [e.data.model_id, e.data.next_model_id, e.data.operation])).toEqual([["flaky", "backup", "invoke"], ["flaky", "backup", "stream"]]);
    expect(fallbacks[0].data.error).toContain("HTTP 503");
    expect(entries.filter((e) => e.type === "model.usage").map((e) => [e.data.model_id, e.data.requested_model_id])).toEqual([["backup", "flaky"], ["backup", "flaky"]]);
  });

  it("without a fallback, a provider error is a 502 whose message has the key scrubbed", async () => {
    const { result, runId } = await inRun("narrow", async ({ api }) => ({
      invoke: await api("model.invoke", { model_id: "flaky", messages: [{ role: "user", content: "no fallback" }] }),
      stream: await api("model.stream", { model_id: "chat", messages: [{ role: "user", content: "not granted" }] }),
    }));
    expect(result.invoke.status).toBe(502);
    expect(result.invoke.body.error).toMatchObject({ code: "runtime_error", retryable: true, details: { model_id: "flaky", upstream_status: 503 } });
    expect(result.invoke.body.error.message).toContain("[redacted]");
    expect(JSON.stringify(result.invoke)).not.toContain(SECRETS.flaky);
    // The manifest asks for stream; the agent's allow list does not.
    expect([result.stream.status, result.stream.body.error.code]).toEqual([403, "unauthorized"]);
    expect((await ledger(runId)).find((e) => e.type === "model.failed")?.data).toMatchObject({ model_id: "flaky", operation: "invoke", code: "runtime_error" });
  });

  it("reranks documents with a rerank model", async () => {
    const { result, runId } = await inRun("rerank", async ({ api }) =>
      api("model.rerank", { model_id: "reranker", query: "cats", documents: ["dogs", "about cats", "birds"], top_k: 2 }),
    );
    expect(result.body.data).toEqual({ model_id: "reranker", results: [{ index: 1, score: 0.9 }, { index: 2, score: 0.5 }], usage: { prompt_tokens: null, completion_tokens: null, total_tokens: 42 } });
    expect(provider.calls.find((c) => c.path === "/v1/rerank")?.body).toEqual({ model: "rr-1", query: "cats", documents: ["dogs", "about cats", "birds"], top_n: 2 });
    expect((await ledger(runId)).find((e) => e.type === "model.usage")?.data).toMatchObject({ model_id: "reranker", operation: "rerank", total_tokens: 42 });
  });
});

describe("tools", () => {
  it("calls an HTTP tool with its secret headers, and records the call in the ledger", async () => {
    const { result, runId } = await inRun("http-tool", async ({ api }) => ({
      detail: await api("tool.detail", { tool_name: "weather" }),
      call: await api("tool.call", { tool_name: "weather", parameters: { city: "Oslo", days: 2 } }),
    }));
    expect(result.detail.body.data).toEqual({ tool_name: "weather", description: "weather tool", parameters: WEATHER_PARAMS });
    expect(result.call.status).toBe(200);
    expect(result.call.body.data).toMatchObject({ tool_name: "weather", result: { city: "Oslo", forecast: "sunny", days: 2 } });
    const toolCallId = result.call.body.data.tool_call_id;
    const seen = tools.calls.find((c) => c.headers["x-agent-tool-call-id"] === toolCallId)!;
    expect(seen).toMatchObject({ path: "/weather", body: { city: "Oslo", days: 2 } });
    expect(seen.headers["x-api-key"]).toBe(SECRETS.weather);
    expect(seen.headers["x-agent-run-id"]).toBe(runId);

    const calls = (await ledger(runId)).filter((e) => e.type.startsWith("tool.call."));
    expect(calls.map((e) => [e.type, e.origin, e.data.tool_call_id])).toEqual([
      ["tool.call.started", "host", toolCallId],
      ["tool.call.completed", "host", toolCallId],
    ]);
    expect(calls[0].data.parameters).toEqual({ city: "Oslo", days: 2 });
    expect(calls[1].data.result).toEqual({ city: "Oslo", forecast: "sunny", days: 2 });
  });

  it("calls tools discovered on an MCP server over streamable HTTP, on one session per run", async () => {
    const run = () =>
      inRun("mcp-tool", async ({ api }) => ({
        add: await api("tool.call", { tool_name: "calc.add", parameters: { a: 2, b: 3 } }),
        shout: await api("tool.call", { tool_name: "calc.shout", parameters: { text: "hey" } }),
        again: await api("tool.call", { tool_name: "calc.add", parameters: { a: 1, b: 1 } }),
      }));
    const before = mcp.calls.length;
    const { result } = await run();
    expect(result.add.body.data.result).toEqual({ content: [{ type: "text", text: "5" }], structuredContent: { sum: 5 }, isError: false });
    expect(result.shout.body.data.result).toEqual({ content: [{ type: "text", text: "HEY" }], isError: false });
    expect(result.again.body.data.result).toMatchObject({ structuredContent: { sum: 2 } });
    // Three calls, one handshake: the session is opened by the first call and kept for the run.
    const methods = () => mcp.calls.slice(before).map((c) => c.method);
    expect(methods().filter((m) => m === "initialize")).toHaveLength(1);
    expect(methods().filter((m) => m === "tools/call")).toHaveLength(3);
    // The next run opens its own.
    await run();
    expect(methods().filter((m) => m === "initialize")).toHaveLength(2);
  });

  it("refuses parameters that do not match the tool's schema with 400, without reaching the tool", async () => {
    const httpBefore = tools.calls.length;
    const mcpBefore = mcp.calls.filter((c) => c.method === "tools/call").length;
    const { result, runId } = await inRun("invalid-params", async ({ api }) => ({
      http: await api("tool.call", { tool_name: "weather", parameters: { city: 5, days: 9, extra: true } }),
      missing: await api("tool.call", { tool_name: "weather", parameters: {} }),
      mcp: await api("tool.call", { tool_name: "calc.add", parameters: { a: "two", b: 3 } }),
    }));
    expect(result.http.status).toBe(400);
    expect(result.http.body.error.code).toBe("invalid_argument");
    expect(result.http.body.error.details.issues.map((i: any) => i.path).sort()).toEqual(["/city", "/days", "/extra"]);
    expect([result.missing.status, result.missing.body.error.details.issues]).toEqual([400, [{ path: "/city", message: "is required" }]]);
    expect([result.mcp.status, result.mcp.body.error.code]).toEqual([400, "invalid_argument"]);
    expect(tools.calls.length).toBe(httpBefore);
    expect(mcp.calls.filter((c) => c.method === "tools/call").length).toBe(mcpBefore);
    expect((await ledger(runId)).filter((e) => e.type.startsWith("tool.call."))).toEqual([]);
  });

  it("stores a result over the inline limit as an artifact and returns a reference", async () => {
    const { result } = await inRun("big-tool", async ({ api }) => api("tool.call", { tool_name: "big", parameters: {} }));
    const ref = result.body.data.result_ref;
    expect(result.body.data.result).toBeUndefined();
    expect(ref).toMatchObject({ artifact_type: "tool_result", mime_type: "application/json", name: "big-result.json" });
    expect(ref.size_bytes).toBeGreaterThan(INLINE_LIMIT);
    const stored = JSON.parse(Buffer.from((await host.r2Object(`artifacts/${ref.artifact_id}`))!).toString("utf8"));
    expect(stored.blob).toHaveLength(4 * INLINE_LIMIT);
  });

  it("ends a tool call that does not answer within the per-call timeout", async () => {
    const started = Date.now();
    const { result, runId } = await inRun("slow-tool", async ({ api }) => api("tool.call", { tool_name: "slow", parameters: {} }));
    expect([result.status, result.body.error.code]).toEqual([408, "deadline_exceeded"]);
    expect(result.body.error.message).toContain(`${TOOL_TIMEOUT_MS} ms`);
    expect(Date.now() - started).toBeLessThan(5_000);
    const completed = (await ledger(runId)).find((e) => e.type === "tool.call.completed");
    expect(completed?.data.error).toMatchObject({ code: "deadline_exceeded" });
  });

  it("scrubs a tool's own credentials from what it answers", async () => {
    const { result } = await inRun("echo-tool", async ({ api }) => api("tool.call", { tool_name: "echo_auth", parameters: {} }));
    expect(result.body.data.result).toEqual({ you_sent: "[redacted]" });
    expect(tools.calls.find((c) => c.path === "/echo-auth")?.headers["x-api-key"]).toBe(SECRETS.echo);
  });
});

describe("careless upstreams", () => {
  it("have their credentials scrubbed from what they answer: secrets JSON escapes, and secrets in endpoint URLs", async () => {
    const { result } = await inRun("careless", async ({ api }) => ({
      quote: await api("tool.call", { tool_name: "echo_quote", parameters: {} }),
      url: await api("tool.call", { tool_name: "echo_url", parameters: {} }),
      mcp: await api("tool.call", { tool_name: "keyed.shout", parameters: { text: "psst" } }),
      kb: await api("knowledge.retrieve", { kb_id: "quoted-kb", query: "echo", top_k: 1 }),
    }));
    expect(result.quote.body.data.result).toEqual({ you_sent: "[redacted]" });
    expect(tools.calls.find((c) => c.headers["x-api-key"] === SECRETS.quoted)).toBeDefined();
    expect(result.url.body.data.result).toEqual({ path: "/echo-url?key=[redacted]&lang=en" });
    expect(result.mcp.body.data.result).toMatchObject({ content: [{ type: "text", text: "PSST" }] });
    expect(result.kb.body.data?.entries, JSON.stringify(result.kb)).toEqual([{ content: "you sent Bearer [redacted]", score: 1, metadata: { auth: "Bearer [redacted]" } }]);
  });

  it("have the credentials in their URLs masked in admin views", async () => {
    const tool = await host.admin("GET", "/v1/admin/tools/echo_url");
    expect(tool.body.endpoint).toBe(`${tools.url}/echo-url?key=********&lang=********`);
    const server = await host.admin("GET", "/v1/admin/mcp-servers/keyed");
    expect(server.body.url).toBe(`${mcp.url}/********?access_token=********`);
    expect(JSON.stringify([tool.body, server.body, (await host.admin("GET", "/v1/admin/mcp-servers")).body])).not.toMatch(new RegExp(`${SECRETS.urlKey}|${SECRETS.mcpPath}|${SECRETS.mcpQuery}`));
  });
});

describe("knowledge bases", () => {
  it("retrieves scored entries, best first, at most top_k", async () => {
    const { result, runId } = await inRun("retrieve", async ({ api }) => ({
      three: await api("knowledge.retrieve", { kb_id: "docs", query: "refunds", top_k: 3, filters: { lang: "en" } }),
      tooMany: await api("knowledge.retrieve", { kb_id: "docs", query: "refunds", top_k: 50 }),
    }));
    const entries = result.three.body.data.entries;
    expect(entries).toHaveLength(3);
    expect(entries.map((e: any) => e.score)).toEqual([...entries.map((e: any) => e.score)].sort((a, b) => b - a));
    expect(entries[0]).toMatchObject({ content: expect.stringContaining("refunds passage"), metadata: { doc: expect.any(String) } });
    expect(retrieval.calls.at(-1)).toEqual({ authorization: `Bearer ${SECRETS.kb}`, body: { query: "refunds", top_k: 3, filters: { lang: "en" } } });
    expect([result.tooMany.status, result.tooMany.body.error.code]).toEqual([400, "invalid_argument"]);
    expect((await ledger(runId)).find((e) => e.type === "knowledge.retrieved")?.data).toMatchObject({ kb_id: "docs", top_k: 3, entry_count: 3 });
  });
});

describe("authorisation", () => {
  it("refuses an ungranted model, tool or knowledge base with 403 and audits each refusal", async () => {
    const providerBefore = provider.calls.length;
    const toolBefore = tools.calls.length;
    const retrievalBefore = retrieval.calls.length;
    const { result, runId } = await inRun("ungranted", async ({ api }) => ({
      model: await api("model.invoke", { model_id: "private", messages: [{ role: "user", content: "x" }] }),
      rerankWithLlm: await api("model.rerank", { model_id: "chat", query: "q", documents: ["d"] }),
      tool: await api("tool.call", { tool_name: "ungranted", parameters: { city: "Oslo" } }),
      toolDetail: await api("tool.detail", { tool_name: "nope" }),
      kb: await api("knowledge.retrieve", { kb_id: "private-kb", query: "q" }),
    }));
    for (const key of ["model", "rerankWithLlm", "tool", "toolDetail", "kb"]) {
      expect([key, result[key].status, result[key].body.error.code]).toEqual([key, 403, "unauthorized"]);
    }
    expect(provider.calls.length).toBe(providerBefore);
    expect(tools.calls.length).toBe(toolBefore);
    expect(retrieval.calls.length).toBe(retrievalBefore);

    const { result: denials } = await inRun("ungranted", async ({ api }) => {
      const events = await api("event.page", { limit: 100 });
      // event.page is newest first.
      return events.body.data.items.filter((e: any) => e.event_type === "host_api.denied" && e.metadata.run_id === runId).map((e: any) => e.metadata).reverse();
    });
    expect(denials.map((d: any) => [d.action, d.resource.resource_id, d.resource.operation])).toEqual([
      ["model.invoke", "private", "invoke"],
      ["model.rerank", "chat", "rerank"],
      ["tool.call", "ungranted", "call"],
      ["tool.detail", "nope", "detail"],
      ["knowledge.retrieve", "private-kb", "retrieve"],
    ]);
    for (const d of denials) expect(d).toMatchObject({ run_id: runId, runner_id: runner.runnerId() });
  });

  it("grants each operation separately: a tool granted for detail cannot be called", async () => {
    const before = tools.calls.length;
    const { result } = await inRun("narrow", async ({ api }) => ({
      detail: await api("tool.detail", { tool_name: "weather" }),
      call: await api("tool.call", { tool_name: "weather", parameters: { city: "Oslo" } }),
    }));
    expect(result.detail.status).toBe(200);
    expect([result.call.status, result.call.body.error.code]).toEqual([403, "unauthorized"]);
    expect(result.call.body.error.message).toBe('tool "weather" is not granted to this run for call');
    expect(tools.calls.length).toBe(before);
  });
});

describe("secrets", () => {
  it("never appear in what runners receive, in admin answers, in the ledger, in EventLog or in the Worker's logs", async () => {
    // Exercise every path in this test too, failures included, so it stands on its own.
    const { runId } = await inRun("secrets", async ({ api, raw }) => {
      await api("model.invoke", { model_id: "flaky", messages: [{ role: "user", content: "x" }] });
      for await (const line of ndjson(await raw("model.stream", { model_id: "chat", messages: [{ role: "user", content: "y" }] }))) void line;
      await api("model.rerank", { model_id: "reranker", query: "q", documents: ["a"] });
      await api("tool.call", { tool_name: "weather", parameters: { city: "Rome" } });
      await api("tool.call", { tool_name: "echo_auth", parameters: {} });
      await api("tool.call", { tool_name: "calc.add", parameters: { a: 1, b: 1 } });
      await api("knowledge.retrieve", { kb_id: "docs", query: "z" });
      await api("model.invoke", { model_id: "private", messages: [{ role: "user", content: "x" }] });
      return (await api("event.page", { limit: 100 })).body;
    });
    const { runId: narrowRunId } = await inRun("narrow", async ({ api }) => api("model.invoke", { model_id: "flaky", messages: [{ role: "user", content: "x" }] }));

    const admin: unknown[] = [];
    for (const path of ["/v1/admin/models", "/v1/admin/tools", "/v1/admin/mcp-servers", "/v1/admin/knowledge-bases", "/v1/admin/agents", "/v1/admin/models/chat", "/v1/admin/mcp-servers/calc"]) {
      admin.push((await host.admin("GET", path)).body);
    }
    const runs = (await host.admin("GET", "/v1/runs?limit=200")).body.items as { run_id: string }[];
    expect(runs.map((r) => r.run_id)).toEqual(expect.arrayContaining([runId, narrowRunId]));
    const ledgers = await Promise.all(runs.map((r) => ledger(r.run_id)));

    const corpus = [...seenByRunners, JSON.stringify(admin), JSON.stringify(ledgers), host.logs()].join("\n");
    expect(seenByRunners.length).toBeGreaterThan(10);
    for (const [name, value] of Object.entries(SECRETS)) {
      expect(corpus.includes(value), `secret ${name} leaked`).toBe(false);
      // As it would appear inside serialised JSON.
      expect(corpus.includes(JSON.stringify(value).slice(1, -1)), `secret ${name} leaked (escaped)`).toBe(false);
    }
    // The capture works: upstream failures are logged (scrubbed) for operators.
    expect(host.logs()).toContain("model flaky (invoke) failed");
    // The admin listings mask rather than omit, so an operator sees a key is set.
    expect((admin[0] as any).items[0].api_key).toBe("********");
    expect((admin[6] as any).headers).toEqual({ authorization: "********" });
  });
});

describe("credentials at rest", () => {
  it("are sealed in libSQL, and a value stored before the host had a key still works", async () => {
    const rows = await Promise.all(
      ["SELECT api_key AS v FROM model", "SELECT headers_json AS v FROM tool", "SELECT headers_json AS v FROM mcp_server", "SELECT api_key AS v FROM knowledge_base"].map((q) => host.query<{ v: string | null }>(q)),
    );
    const stored = rows.flat().map((r) => r.v ?? "").join("\n");
    expect(stored).toContain("sealed:v1:");
    // Credentials inside endpoint URLs are stored as given (and masked in views): only keys and headers are sealed.
    const urlBorne = new Set(["urlKey", "mcpPath", "mcpQuery"]);
    for (const [name, value] of Object.entries(SECRETS)) {
      if (urlBorne.has(name)) continue;
      expect(stored.includes(value), `secret ${name} stored in the clear`).toBe(false);
      expect(stored.includes(JSON.stringify(value).slice(1, -1)), `secret ${name} stored in the clear (escaped)`).toBe(false);
    }

    // A row written before SECRETS_KEY was set holds its key as given: it is used as it is.
    await host.query("UPDATE model SET api_key = ? WHERE model_id = 'reranker'", [SECRETS.main]);
    const { result } = await inRun("plain-at-rest", async ({ api }) => (await api("model.rerank", { model_id: "reranker", query: "q", documents: ["a", "b"] })).status);
    expect(result).toBe(200);
  });
});
