import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listenLoopback, readBody, sendJson } from "../support/http-server";
import { startTestHost, type TestHost } from "../support/host";
import { runLedger, startScriptedRunner } from "../support/scripted-runner";

/**
 * What the host sends upstream on a runner's behalf, and what it keeps of a
 * refused call: a model's base URL keeps its query, usage is always asked for
 * on a stream, a header value no request can carry is refused when it is
 * registered, and a denial's record stays small whatever id the runner sent.
 */
const KEY = "sk-requests-0123456789abcdefABCDEF";
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
let provider: Awaited<ReturnType<typeof listenLoopback>>;
const seen: { url: string; body: any }[] = [];

beforeAll(async () => {
  // OpenAI-like: a usage chunk only when stream_options.include_usage is true; routes only under /v1 with the api-version.
  provider = await listenLoopback(async (req, res) => {
    const body = JSON.parse((await readBody(req)) || "{}");
    seen.push({ url: req.url ?? "", body });
    const url = new URL(req.url ?? "/", "http://x");
    if (req.headers.authorization !== `Bearer ${KEY}` || url.searchParams.get("api-version") !== "2024-06-01") return sendJson(res, 401, { error: "bad key or version" });
    if (url.pathname === "/v1/rerank") return sendJson(res, 200, { results: [{ index: 0, relevance_score: 1 }] });
    if (url.pathname !== "/v1/chat/completions") return sendJson(res, 404, { error: "no such route" });
    if (!body.stream) return sendJson(res, 200, { choices: [{ message: { role: "assistant", content: "ok" }, finish_reason: "stop" }] });
    const chunks: unknown[] = [{ choices: [{ index: 0, delta: { content: "hello" }, finish_reason: "stop" }] }];
    if (body.stream_options?.include_usage === true) chunks.push({ choices: [], usage: { prompt_tokens: 100, completion_tokens: 1, total_tokens: 101 } });
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.end(`${chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`).join("")}data: [DONE]\n\n`);
  });
  runner = await startScriptedRunner({ name: "requests", runners: [{ name: "default", label: { en_US: "requests" }, permissions: { models: ["invoke", "stream", "rerank"], tools: ["call"] } }] });
  host = await startTestHost();
  const base_url = `${provider.url}/v1?api-version=2024-06-01`;
  for (const [model_id, kind] of [["q-llm", "llm"], ["q-rr", "rerank"]]) {
    const res = await host.admin("POST", "/v1/admin/models", { model_id, name: model_id, kind, base_url, api_key: KEY, model: "m" });
    if (res.status !== 201) throw new Error(JSON.stringify(res.body));
  }
  await runner.register(host);
  const agent = await host.admin("POST", "/v1/admin/agents", {
    agent_id: "requests", name: "requests", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "global" }, resource_policy: { models: ["q-llm", "q-rr"] },
  });
  if (agent.status !== 201) throw new Error(JSON.stringify(agent.body));
});

afterAll(async () => {
  await host?.dispose();
  await Promise.all([runner?.close(), provider?.close()]);
});

describe("requests to host-held resources", () => {
  it("calls {base path}/chat/completions and /rerank with the base URL's query kept", async () => {
    seen.length = 0;
    const { result } = await runner.run(host, "baseurl-query", async (api) => ({
      invoke: (await api("model.invoke", { model_id: "q-llm", messages: [{ role: "user", content: "hi" }] })).status,
      rerank: (await api("model.rerank", { model_id: "q-rr", query: "a", documents: ["a"] })).status,
    }));
    expect(seen.map((s) => s.url)).toEqual(["/v1/chat/completions?api-version=2024-06-01", "/v1/rerank?api-version=2024-06-01"]);
    expect(result).toEqual({ invoke: 200, rerank: 200 });
  });

  it("asks a rerank provider for at most the documents given, however large top_k is (sys.maxsize means all)", async () => {
    seen.length = 0;
    const { result } = await runner.run(host, "rerank-top-k", async (api) => ({
      huge: (await api("model.rerank", { model_id: "q-rr", query: "a", documents: ["a", "b"], top_k: 2 ** 63 })).status,
      one: (await api("model.rerank", { model_id: "q-rr", query: "a", documents: ["a", "b"], top_k: 1 })).status,
      zero: (await api("model.rerank", { model_id: "q-rr", query: "a", documents: ["a", "b"], top_k: 0 })).status,
    }));
    expect(result).toEqual({ huge: 200, one: 200, zero: 400 });
    expect(seen.map((s) => s.body.top_n)).toEqual([2, 1]);
  });

  it("always asks for usage on a stream: a runner's extra cannot switch off what the host records", async () => {
    seen.length = 0;
    const { runId } = await runner.run(host, "usage-off", async (_api, _ctx, _emit, raw) => {
      const res = await raw("model.stream", { model_id: "q-llm", messages: [{ role: "user", content: "hi" }], extra: { stream_options: { include_usage: false } } });
      return (await res.text()).length;
    });
    expect(seen.at(-1)!.body.stream_options).toEqual({ include_usage: true });
    const usage = (await runLedger(host, runId)).filter((e: any) => e.type === "model.usage");
    expect(usage.map((e: any) => e.data.total_tokens)).toEqual([101]);
  });

  it("refuses an extra that would have a gateway pick other models than the granted one, and calls no provider", async () => {
    seen.length = 0;
    const { result } = await runner.run(host, "extra-routing", async (api) => {
      const answers = [];
      // OpenRouter's model fallbacks and routing, LiteLLM's fallbacks: each names models the agent was not granted.
      for (const extra of [{ models: ["gpt-ungranted"] }, { route: "fallback" }, { fallbacks: ["gpt-ungranted"] }]) {
        const answer = await api("model.invoke", { model_id: "q-llm", messages: [{ role: "user", content: "hi" }], extra });
        answers.push([answer.status, answer.body.error?.code, answer.body.error?.message]);
      }
      const allowed = await api("model.invoke", { model_id: "q-llm", messages: [{ role: "user", content: "hi" }], extra: { temperature: 0.2 } });
      return { answers, allowed: allowed.status };
    });
    for (const [status, code, message] of result.answers) {
      expect([status, code]).toEqual([400, "invalid_argument"]);
      expect(message).toMatch(/fallback_models/);
    }
    expect(result.allowed).toBe(200);
    expect(seen.map((s) => s.body.temperature)).toEqual([0.2]);
  });

  it.each([
    ["/v1/admin/tools", { name: "crlf", description: "", endpoint: "http://127.0.0.1:9/t", headers: { "x-api-key": "key-123456\r\nx-injected: 1" } }],
    ["/v1/admin/mcp-servers", { name: "crlfmcp", url: "http://127.0.0.1:9/mcp", headers: { authorization: "Bearer key-123456\nx-injected: 1" } }],
    // Keys sent as `Authorization: Bearer {api_key}`: two keys pasted on two lines would fail every call as if the provider were down.
    ["/v1/admin/models", { model_id: "crlf-model", name: "m", kind: "llm", base_url: "http://127.0.0.1:9/v1", api_key: "sk-first\nsk-second", model: "x" }],
    ["/v1/admin/knowledge-bases", { kb_id: "crlf-kb", name: "kb", endpoint: "http://127.0.0.1:9/kb", api_key: "sk-first\r\nsk-second" }],
    ["/v1/admin/bots", { platform: "discord", credentials: { application_id: "1234", public_key: "ab".repeat(32), bot_token: "token-1\u0000" } }],
  ])("%s refuses a header value with a line break or NUL (400), so no call can fail on it later", async (path, body) => {
    const res = await host.admin("POST", path, body);
    expect([res.status, res.body.error?.code]).toEqual([400, "invalid_request"]);
    expect(res.body.error.message).toMatch(/line break or NUL/);
    // The refused key is never echoed.
    expect(JSON.stringify(res.body)).not.toContain("sk-second");
  });

  it("keeps the host_api.denied record small whatever the length of the id refused", async () => {
    const huge = "m".repeat(1_500_000);
    const { result, runId } = await runner.run(host, "deny-huge", async (api) => {
      const answer = await api("model.invoke", { model_id: huge, messages: [{ role: "user", content: "hi" }] });
      return { status: answer.status, code: answer.body.error?.code };
    });
    expect(result).toEqual({ status: 403, code: "unauthorized" });
    const rows = await host.query<{ n: number }>("SELECT length(data_json) + length(metadata_json) AS n FROM event_log WHERE event_type = 'host_api.denied' AND run_id = ?", [runId]);
    expect(rows.length).toBe(1);
    expect(rows[0].n).toBeLessThan(4 * 1024);
  });
});
