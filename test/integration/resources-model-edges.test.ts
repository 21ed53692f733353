import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listenLoopback, readBody, sendJson } from "../support/http-server";
import { startTestHost, type TestHost } from "../support/host";
import { runLedger, startScriptedRunner } from "../support/scripted-runner";
import { sseBody } from "../support/model-agent";

/**
 * Host-held models at their edges: a stream that fails before its first token falls back, a streamed message is the one
 * model.invoke gives (a tool name repeated in each fragment named once, in the deltas too), a 200 carrying an error is
 * that error (a chat completion's or a rerank's, or its first choice's, streamed or not), a throttled provider's
 * Retry-After reaches the runner, a rerank ranks each document once, and a ranking the host cannot trust (a result
 * without a score, a document that was not sent) is an invalid answer, never a silently different ranking.
 */
const KEY = "sk-review-0123456789abcdefABCDEF";
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
let provider: Awaited<ReturnType<typeof listenLoopback>>;
const user = (content: string) => [{ role: "user", content }];
const lines = (text: string) => text.split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));

beforeAll(async () => {
  provider = await listenLoopback(async (req, res) => {
    const body = JSON.parse((await readBody(req)) || "{}");
    if (req.headers.authorization !== `Bearer ${KEY}`) return sendJson(res, 401, { error: "bad key" });
    const m = body.model;
    if (req.url === "/v1/rerank") {
      // A provider that lists the best document twice.
      if (m === "rr-dup") return sendJson(res, 200, { results: [{ index: 0, relevance_score: 0.9 }, { index: 0, relevance_score: 0.9 }, { index: 1, relevance_score: 0.5 }] });
      // A gateway's rerank that failed once begun: 200, the error in the body, with or without an empty results list.
      if (m === "rr-late") return sendJson(res, 200, { error: { code: 400, message: "query is longer than this reranker's 512 tokens" } });
      if (m === "rr-late-empty") return sendJson(res, 200, { results: [], error: { code: 400, message: "documents exceed this reranker's limit" } });
      // Voyage's answer: the same entries, listed under `data`.
      if (m === "rr-voyage") return sendJson(res, 200, { object: "list", data: [{ index: 1, relevance_score: 0.8 }, { index: 0, relevance_score: 0.3 }], model: m, usage: { total_tokens: 9 } });
      // Answers no ranking can be read from: a result without a score, a document the host never sent, TEI's bare list.
      if (m === "rr-no-score") return sendJson(res, 200, { results: [{ index: 1, relevance_score: 0.2 }, { index: 0 }] });
      if (m === "rr-outside") return sendJson(res, 200, { results: [{ index: 7, relevance_score: 0.99 }, { index: 0, relevance_score: 0.5 }] });
      if (m === "rr-bare") return sendJson(res, 200, [{ index: 0, score: 0.4 }]);
      return sendJson(res, 404, { error: "no route" });
    }
    // An overloaded upstream behind a gateway: 200 event stream whose first (and only) event is an error.
    if (m === "overloaded" && body.stream) {
      res.writeHead(200, { "content-type": "text/event-stream" });
      return void res.end(sseBody([{ error: { message: "upstream overloaded, try again", type: "server_error", code: 503 } }]));
    }
    if (m === "overloaded") return sendJson(res, 503, { error: { message: "upstream overloaded" } });
    // OpenRouter's timeout once it has taken the request: its code 408, in a 200's body or as a stream's first event.
    if (m === "timed-out") {
      const error = { code: 408, message: "Timed out waiting for the upstream provider" };
      if (!body.stream) return sendJson(res, 200, { error });
      res.writeHead(200, { "content-type": "text/event-stream" });
      return void res.end(sseBody([{ error }]));
    }
    // OpenRouter: once the model has started on a request, its failure is a 200 whose body is the error, its code the status.
    if (m === "failed-late") return sendJson(res, 200, { error: { code: 400, message: "This model's maximum context length is 8192 tokens", metadata: { provider_name: "Upstream" } } });
    // The same failure with an empty choices list beside it.
    if (m === "failed-late-empty") return sendJson(res, 200, { choices: [], error: { code: 400, message: "This model's maximum context length is 4096 tokens" } });
    // OpenRouter once the model has begun: a 200 whose first choice failed (`finish_reason: "error"` and its `error`),
    // in the completion, or in a chunk after the first tokens ("choice-late": a 400, the request's own fault) or as the
    // stream's first event, before any token, beside OpenRouter's top-level copy ("choice-down": the upstream is down).
    if (m === "choice-late" || m === "choice-down") {
      const error = m === "choice-late" ? { code: 400, message: "Provider returned error: prompt flagged" } : { code: 502, message: "upstream model is down" };
      if (!body.stream) return sendJson(res, 200, { choices: [{ index: 0, message: { role: "assistant", content: "" }, finish_reason: "error", error }] });
      const failed = { choices: [{ index: 0, delta: { content: "" }, finish_reason: "error", error }] };
      res.writeHead(200, { "content-type": "text/event-stream" });
      if (m === "choice-down") return void res.end(sseBody([{ ...failed, error }, "[DONE]"]));
      return void res.end(sseBody([{ choices: [{ index: 0, delta: { role: "assistant", content: "Hal" }, finish_reason: null }] }, failed, "[DONE]"]));
    }
    // A provider ending the message with finish_reason "error" and nothing more said.
    if (m === "finish-error") {
      if (!body.stream) return sendJson(res, 200, { choices: [{ index: 0, message: { role: "assistant", content: "Hal" }, finish_reason: "error" }] });
      res.writeHead(200, { "content-type": "text/event-stream" });
      return void res.end(sseBody([{ choices: [{ index: 0, delta: { role: "assistant", content: "Hal" }, finish_reason: null }] }, { choices: [{ index: 0, delta: {}, finish_reason: "error" }] }, "[DONE]"]));
    }
    // A throttled provider saying when to come back.
    if (m === "throttled") {
      res.writeHead(429, { "content-type": "application/json", "retry-after": "7" });
      return void res.end(JSON.stringify({ error: { message: "Rate limit reached for requests", type: "requests", code: "rate_limit_exceeded" } }));
    }
    // MiniMax via NVIDIA NIM, and some gateways: a tool call's whole name again in every fragment of it.
    if (m === "name-again" && body.stream) {
      const frag = (args: string) => ({ choices: [{ index: 0, delta: { tool_calls: [{ index: 0, id: "call_7", type: "function", function: { name: "lookup", arguments: args } }] }, finish_reason: null }] });
      res.writeHead(200, { "content-type": "text/event-stream" });
      return void res.end(sseBody([frag(""), frag('{"q":'), frag('"x"}'), { choices: [{ index: 0, delta: {}, finish_reason: "tool_calls" }] }, "[DONE]"]));
    }
    // A tool-call-only answer.
    if (m === "caller") {
      const call = { id: "call_1", type: "function", function: { name: "lookup", arguments: '{"q":"x"}' } };
      if (!body.stream) return sendJson(res, 200, { choices: [{ index: 0, message: { role: "assistant", content: null, tool_calls: [call] }, finish_reason: "tool_calls" }] });
      res.writeHead(200, { "content-type": "text/event-stream" });
      return void res.end(sseBody([
        { choices: [{ index: 0, delta: { role: "assistant", tool_calls: [{ index: 0, ...call, function: { name: "lookup", arguments: "" } }] }, finish_reason: null }] },
        { choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '{"q":"x"}' } }] }, finish_reason: null }] },
        { choices: [{ index: 0, delta: {}, finish_reason: "tool_calls" }] },
        "[DONE]",
      ]));
    }
    if (body.stream) {
      res.writeHead(200, { "content-type": "text/event-stream" });
      return void res.end(sseBody([{ choices: [{ index: 0, delta: { content: `${m} answers` }, finish_reason: "stop" }] }, "[DONE]"]));
    }
    return sendJson(res, 200, { choices: [{ index: 0, message: { role: "assistant", content: `${m} answers` }, finish_reason: "stop" }] });
  });
  runner = await startScriptedRunner({ name: "review", runners: [{ name: "default", label: { en_US: "review" }, permissions: { models: ["invoke", "stream", "rerank"] } }] });
  host = await startTestHost();
  for (const [model_id, kind, model] of [["primary", "llm", "overloaded"], ["timed-out", "llm", "timed-out"], ["backup", "llm", "backup-model"], ["caller", "llm", "caller"], ["rr", "rerank", "rr-dup"], ["late", "llm", "failed-late"], ["throttled", "llm", "throttled"], ["name-again", "llm", "name-again"], ["late-empty", "llm", "failed-late-empty"], ["rr-late", "rerank", "rr-late"], ["rr-late-empty", "rerank", "rr-late-empty"], ["choice-late", "llm", "choice-late"], ["choice-down", "llm", "choice-down"], ["finish-error", "llm", "finish-error"], ["rr-voyage", "rerank", "rr-voyage"], ["rr-no-score", "rerank", "rr-no-score"], ["rr-outside", "rerank", "rr-outside"], ["rr-bare", "rerank", "rr-bare"]]) {
    const res = await host.admin("POST", "/v1/admin/models", { model_id, name: model_id, kind, base_url: `${provider.url}/v1`, api_key: KEY, model });
    if (res.status !== 201) throw new Error(JSON.stringify(res.body));
  }
  await runner.register(host);
  const agent = await host.admin("POST", "/v1/admin/agents", {
    agent_id: "review", name: "review", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "global" },
    // "throttled" comes last among the fallbacks: asked for, it has none after it.
    resource_policy: { models: ["primary", "timed-out", "caller", "rr", "late", "name-again", "late-empty", "rr-late", "rr-late-empty", "choice-late", "choice-down", "finish-error", "rr-voyage", "rr-no-score", "rr-outside", "rr-bare"], fallback_models: ["backup", "throttled"] },
  });
  if (agent.status !== 201) throw new Error(JSON.stringify(agent.body));
});

afterAll(async () => {
  await host?.dispose();
  await Promise.all([runner?.close(), provider?.close()]);
});

describe("model.stream fallback", () => {
  it("falls back when the provider's stream fails with a 5xx error before any token, as model.invoke does for the same outage", async () => {
    const { result, runId } = await runner.run(host, "fallback-first-chunk", async (api, _ctx, _emit, raw) => ({
      invoke: await api("model.invoke", { model_id: "primary", messages: user("hi") }),
      stream: lines(await (await raw("model.stream", { model_id: "primary", messages: user("hi") })).text()),
    }));
    // model.invoke: the 503 falls back to the backup model.
    expect(result.invoke.body.data).toMatchObject({ model_id: "backup", message: { content: "backup-model answers" } });
    // model.stream: the runner was sent nothing yet, the provider said it is overloaded (503): the backup should answer too.
    expect(result.stream.at(-1)).toMatchObject({ type: "completed", model_id: "backup", message: { content: "backup-model answers" } });
    const host_records = (await runLedger(host, runId)).filter((e) => e.origin === "host").map((e) => [e.type, e.data.operation]);
    expect(host_records).toContainEqual(["model.fallback", "stream"]);
  });
});

describe("model.stream fallback on a 408", () => {
  it("falls back when the stream's first event reports a 408, as model.invoke does for the same error: one rule for a provider's fault (5xx, 429, 408)", async () => {
    const { result, runId } = await runner.run(host, "fallback-first-chunk-408", async (api, _ctx, _emit, raw) => ({
      invoke: await api("model.invoke", { model_id: "timed-out", messages: user("hi") }),
      stream: lines(await (await raw("model.stream", { model_id: "timed-out", messages: user("hi") })).text()),
    }));
    expect(result.invoke.body.data).toMatchObject({ model_id: "backup", message: { content: "backup-model answers" } });
    expect(result.stream.at(-1)).toMatchObject({ type: "completed", model_id: "backup", message: { content: "backup-model answers" } });
    const fallbacks = (await runLedger(host, runId)).filter((e) => e.origin === "host" && e.type === "model.fallback").map((e) => e.data.operation);
    expect(fallbacks).toEqual(["invoke", "stream"]);
  });
});

describe("model.stream's completed message", () => {
  it("is the message as model.invoke gives it: a tool-call-only answer has content null", async () => {
    const { result } = await runner.run(host, "parity", async (api, _ctx, _emit, raw) => ({
      invoke: (await api("model.invoke", { model_id: "caller", messages: user("hi") })).body.data.message,
      stream: lines(await (await raw("model.stream", { model_id: "caller", messages: user("hi") })).text()).at(-1).message,
    }));
    expect(result.invoke).toEqual({ role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "lookup", arguments: '{"q":"x"}' } }] });
    expect(result.stream).toEqual(result.invoke);
  });
});

describe("a streamed tool call whose fragments each repeat its name", () => {
  it("is named once in the completed message, as model.invoke would name it, not the name repeated", async () => {
    const { result } = await runner.run(host, "name-again", async (_api, _ctx, _emit, raw) => lines(await (await raw("model.stream", { model_id: "name-again", messages: user("hi") })).text()).at(-1));
    expect(result).toMatchObject({ type: "completed", finish_reason: "tool_calls" });
    expect(result.message.tool_calls).toEqual([{ id: "call_7", type: "function", function: { name: "lookup", arguments: '{"q":"x"}' } }]);
  });

  it("is named once in the deltas too: a runner joining the fragments' names, as OpenAI's Python client and LangChain do, gets the name", async () => {
    const { result } = await runner.run(host, "name-again-deltas", async (_api, _ctx, _emit, raw) => lines(await (await raw("model.stream", { model_id: "name-again", messages: user("hi") })).text()));
    const fragments = result.filter((l: any) => l.type === "delta").flatMap((l: any) => l.chunk.tool_calls ?? []);
    expect(fragments[0]).toMatchObject({ index: 0, id: "call_7", function: { name: "lookup" } });
    expect(fragments.map((f: any) => f.function?.name ?? "").join("")).toBe("lookup");
    expect(fragments.map((f: any) => f.function?.arguments ?? "").join("")).toBe('{"q":"x"}');
  });
});

describe("a provider's error answered with 200", () => {
  it("is the provider's error, as its code says: its message shown, not retryable for a 400, and no fallback tried", async () => {
    const { result, runId } = await runner.run(host, "failed-late", async (api) => api("model.invoke", { model_id: "late", messages: user("hi") }));
    expect(result.status).toBe(502);
    expect(result.body.error).toMatchObject({ code: "runtime_error", retryable: false, details: { model_id: "late", upstream_status: 400 } });
    expect(result.body.error.message).toContain("maximum context length is 8192 tokens");
    const types = (await runLedger(host, runId)).filter((e) => e.origin === "host").map((e) => e.type);
    expect(types).not.toContain("model.fallback");
  });

  it("is the provider's error also beside an empty choices list, not a garbled answer handed to a fallback", async () => {
    const { result, runId } = await runner.run(host, "failed-late-empty", async (api) => api("model.invoke", { model_id: "late-empty", messages: user("hi") }));
    expect(result.status).toBe(502);
    expect(result.body.error).toMatchObject({ code: "runtime_error", retryable: false, details: { model_id: "late-empty", upstream_status: 400 } });
    expect(result.body.error.message).toContain("maximum context length is 4096 tokens");
    expect((await runLedger(host, runId)).map((e) => e.type)).not.toContain("model.fallback");
  });

  it("from a rerank provider is its error too: its message shown, not retryable for a 400, never an empty ranking", async () => {
    const { result } = await runner.run(host, "rerank-late", async (api) => ({
      bare: await api("model.rerank", { model_id: "rr-late", query: "q", documents: ["a", "b"] }),
      empty: await api("model.rerank", { model_id: "rr-late-empty", query: "q", documents: ["a", "b"] }),
    }));
    expect(result.bare.status).toBe(502);
    expect(result.bare.body.error).toMatchObject({ code: "runtime_error", retryable: false, details: { model_id: "rr-late", upstream_status: 400 } });
    expect(result.bare.body.error.message).toContain("longer than this reranker's 512 tokens");
    expect(result.empty.status).toBe(502);
    expect(result.empty.body.error).toMatchObject({ code: "runtime_error", retryable: false, details: { model_id: "rr-late-empty", upstream_status: 400 } });
    expect(result.empty.body.error.message).toContain("documents exceed this reranker's limit");
  });
});

describe("a throttled provider's Retry-After", () => {
  it("reaches the runner with its retryable error, as details.retry_after_ms", async () => {
    const { result } = await runner.run(host, "throttled", async (api) => api("model.invoke", { model_id: "throttled", messages: user("hi") }));
    expect(result.status).toBe(502);
    expect(result.body.error).toMatchObject({ code: "runtime_error", retryable: true, details: { model_id: "throttled", upstream_status: 429, retry_after_ms: 7000 } });
  });
});

describe("model.rerank results", () => {
  it("rank each document at most once, even when the provider repeats one", async () => {
    const { result } = await runner.run(host, "rerank-dup", async (api) => (await api("model.rerank", { model_id: "rr", query: "q", documents: ["a", "b"] })).body);
    const indexes = result.data.results.map((r: any) => r.index);
    expect(indexes).toEqual([...new Set(indexes)]);
    expect(indexes.sort()).toEqual([0, 1]);
  });
});

describe("a provider's first choice that failed (finish_reason \"error\")", () => {
  it("is the provider's error for model.invoke, as its code says: a 400 shown and not retried elsewhere, a 502 falling back, never a success", async () => {
    const { result, runId } = await runner.run(host, "choice-error", async (api) => ({
      late: await api("model.invoke", { model_id: "choice-late", messages: user("hi") }),
      down: await api("model.invoke", { model_id: "choice-down", messages: user("hi") }),
    }));
    expect(result.late.status).toBe(502);
    expect(result.late.body.error).toMatchObject({ code: "runtime_error", retryable: false, details: { model_id: "choice-late", upstream_status: 400 } });
    expect(result.late.body.error.message).toContain("prompt flagged");
    expect(result.down.body.data).toMatchObject({ model_id: "backup", message: { content: "backup-model answers" } });
    const fallbacks = (await runLedger(host, runId)).filter((e) => e.type === "model.fallback").map((e) => e.data.model_id);
    expect(fallbacks).toEqual(["choice-down"]);
  });

  it("ends model.stream with provider_error after the tokens sent, or falls back when it is the stream's first event and the provider's fault", async () => {
    const { result, runId } = await runner.run(host, "choice-error-stream", async (_api, _ctx, _emit, raw) => ({
      late: lines(await (await raw("model.stream", { model_id: "choice-late", messages: user("hi") })).text()),
      down: lines(await (await raw("model.stream", { model_id: "choice-down", messages: user("hi") })).text()),
    }));
    expect(result.late.slice(0, -1).map((l: any) => l.chunk.content)).toEqual(["Hal"]);
    expect(result.late.at(-1)).toMatchObject({ type: "error", error: { code: "provider_error", retryable: false } });
    expect(result.late.at(-1).error.message).toContain("prompt flagged");
    expect(result.down.at(-1)).toMatchObject({ type: "completed", model_id: "backup", message: { content: "backup-model answers" } });
    const failed = (await runLedger(host, runId)).filter((e) => e.type === "model.failed").map((e) => [e.data.model_id, e.data.code]);
    expect(failed).toEqual([["choice-late", "provider_error"]]);
  });

  it("is a failure also when the provider gives no error with it: model.invoke falls back, model.stream ends with provider_error", async () => {
    const { result } = await runner.run(host, "finish-error", async (api, _ctx, _emit, raw) => ({
      invoke: await api("model.invoke", { model_id: "finish-error", messages: user("hi") }),
      stream: lines(await (await raw("model.stream", { model_id: "finish-error", messages: user("hi") })).text()),
    }));
    expect(result.invoke.body.data).toMatchObject({ model_id: "backup", finish_reason: "stop" });
    expect(result.stream.at(-1)).toMatchObject({ type: "error", error: { code: "provider_error", retryable: true } });
    expect(result.stream.at(-1).error.message).toContain('finish_reason "error"');
  });
});

describe("model.rerank answers", () => {
  it("are read from Voyage's `data` list as from `results`", async () => {
    const { result } = await runner.run(host, "rerank-voyage", async (api) => (await api("model.rerank", { model_id: "rr-voyage", query: "q", documents: ["a", "b"] })).body);
    expect(result.data).toEqual({ model_id: "rr-voyage", results: [{ index: 1, score: 0.8 }, { index: 0, score: 0.3 }], usage: { prompt_tokens: null, completion_tokens: null, total_tokens: 9 } });
  });

  it("that cannot be trusted are an invalid answer (a retryable 502 naming what is wrong), never a ranking with a score or a document made up or dropped", async () => {
    const { result } = await runner.run(host, "rerank-invalid", async (api) => {
      const call = (model_id: string) => api("model.rerank", { model_id, query: "q", documents: ["a", "b"] });
      return { noScore: await call("rr-no-score"), outside: await call("rr-outside"), bare: await call("rr-bare") };
    });
    for (const [answer, model_id, says] of [[result.noScore, "rr-no-score", "no score"], [result.outside, "rr-outside", "document 7"], [result.bare, "rr-bare", "{results"]] as const) {
      expect([answer.status, answer.body.error?.code, answer.body.error?.retryable, answer.body.error?.details.model_id]).toEqual([502, "runtime_error", true, model_id]);
      expect(answer.body.error.message).toContain(says);
    }
  });
});
