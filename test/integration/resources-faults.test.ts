import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeMcpServer } from "../support/fake-mcp";
import { startFakeRetrieval } from "../support/fake-retrieval";
import { STREAM_CLOSES_EARLY, STREAM_ENDLESS, STREAM_ERROR_CHUNK, STREAM_NO_DONE, STREAM_STALLS, startFakeProvider } from "../support/fake-provider";
import { startTestHost, type TestHost } from "../support/host";
import { deferred } from "../support/host-api";
import { runLedger, startScriptedRunner } from "../support/scripted-runner";

/**
 * Host-held resources that misbehave: providers that never answer, close a
 * stream early, report an error inside it or do not stream at all; MCP
 * servers that never answer a session's DELETE or answer too much; answers
 * whose bodies stall or trickle after their headers. Each is a
 * fake on loopback; the host must stay bounded and tell the truth.
 */

const KEYS = { main: "sk-faults-main-7d1f0a", backup: "sk-faults-backup-2b9e4c", odd: "sk-faults-odd-5a3c8e", mcp: "mcp-faults-token-9c2e71", kb: "kb-faults-key-3e8a5d" };
const ATTEMPT_TIMEOUT_MS = 700;
const STREAM_IDLE_MS = 700;
const MAX_BYTES = 32 * 1024;

let host: TestHost;
let provider: Awaited<ReturnType<typeof startFakeProvider>>;
let sticky: Awaited<ReturnType<typeof startFakeMcpServer>>;
let retrieval: Awaited<ReturnType<typeof startFakeRetrieval>>;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;

type Api = (action: string, params?: Record<string, unknown>) => Promise<{ status: number; body: any }>;
type Raw = (action: string, params: Record<string, unknown>) => Promise<Response>;

/** Run `script` inside a run of `conversationId` and return what it returned. */
const inRun = <T = any>(conversationId: string, script: (t: { api: Api; raw: Raw }) => Promise<unknown>) =>
  runner.run<T>(host, conversationId, (api, _ctx, _emit, raw) => script({ api, raw }));
const ledger = (runId: string) => runLedger(host, runId);

async function register(path: string, body: unknown) {
  const res = await host.admin("POST", path, body);
  if (res.status !== 201) throw new Error(`POST ${path}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

const lines = async (res: Response) =>
  (await res.text())
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l));

const user = (content: string) => [{ role: "user", content }];

/** The call's answer, or "unanswered" when it takes longer than `ms` (a host that waits for the run's deadline). */
const within = async <T>(ms: number, call: Promise<T>): Promise<T | "unanswered"> => {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<"unanswered">((r) => (timer = setTimeout(r, ms, "unanswered")));
  return Promise.race([call, late]).finally(() => clearTimeout(timer));
};

beforeAll(async () => {
  provider = await startFakeProvider({
    keys: { "gpt-main": KEYS.main, "gpt-backup": KEYS.backup, "gpt-hang": KEYS.odd, "gpt-mute": KEYS.odd, "gpt-json": KEYS.odd, "gpt-stall": KEYS.odd, "rr-stall": KEYS.odd },
    hanging: ["gpt-hang"],
    stallingBodies: ["gpt-stall", "rr-stall"],
    silentStreams: ["gpt-mute"],
    jsonStreams: ["gpt-json"],
  });
  sticky = await startFakeMcpServer({ token: KEYS.mcp, sessionId: "session-1", hangOnDelete: true, hugeBytes: 2 * MAX_BYTES });
  retrieval = await startFakeRetrieval({ apiKey: KEYS.kb });
  runner = await startScriptedRunner({
    name: "faults",
    runners: [{ name: "default", label: { en_US: "faults" }, permissions: { models: ["invoke", "stream", "rerank"], tools: ["detail", "call"], knowledge_bases: ["retrieve"] } }],
  });
  host = await startTestHost({
    vars: {
      MODEL_ATTEMPT_TIMEOUT_MS: String(ATTEMPT_TIMEOUT_MS),
      MODEL_STREAM_IDLE_TIMEOUT_MS: String(STREAM_IDLE_MS),
      RESOURCE_RESPONSE_MAX_BYTES: String(MAX_BYTES),
      TOOL_CALL_TIMEOUT_MS: "5000",
    },
  });
  const llm = (model_id: string, model: string, api_key: string) => register("/v1/admin/models", { model_id, name: model_id, kind: "llm", base_url: provider.baseUrl, api_key, model });
  await llm("chat", "gpt-main", KEYS.main);
  await llm("backup", "gpt-backup", KEYS.backup);
  await llm("hang", "gpt-hang", KEYS.odd);
  await llm("mute", "gpt-mute", KEYS.odd);
  await llm("jsonish", "gpt-json", KEYS.odd);
  await llm("stall", "gpt-stall", KEYS.odd);
  await register("/v1/admin/models", { model_id: "rr-stall", name: "rr-stall", kind: "rerank", base_url: provider.baseUrl, api_key: KEYS.odd, model: "rr-stall" });
  await register("/v1/admin/knowledge-bases", { kb_id: "kb", name: "KB", endpoint: retrieval.url, api_key: KEYS.kb });
  await register("/v1/admin/runner-services", { base_url: runner.url });
  await agent("faults", { type: "global" }, { models: ["chat", "hang", "mute", "jsonish", "stall", "rr-stall"], fallback_models: ["backup"], knowledge_bases: ["kb"] });
  await agent("alone", { type: "conversation", id: "alone" }, { models: ["jsonish", "hang"] });
});

const agent = (agent_id: string, scope: Record<string, unknown>, resource_policy: Record<string, unknown>) =>
  register("/v1/admin/agents", { agent_id, name: agent_id, runner_id: runner.runnerId(), event_types: ["message.received"], scope, resource_policy });

afterAll(async () => {
  await host?.dispose();
  await Promise.all([runner?.close(), provider?.close(), sticky?.close(), retrieval?.close()]);
});

describe("provider attempts", () => {
  it("falls back from a provider that accepts and never answers, within MODEL_ATTEMPT_TIMEOUT_MS", async () => {
    const started = Date.now();
    const { result, runId } = await inRun("attempts", async ({ api, raw }) => ({
      invoke: await api("model.invoke", { model_id: "hang", messages: user("anyone there?") }),
      stream: await lines(await raw("model.stream", { model_id: "hang", messages: user("anyone streaming?") })),
      // Headers at once, then not a byte: the stream is not the runner's until the provider says something.
      mute: await lines(await raw("model.stream", { model_id: "mute", messages: user("say something") })),
    }));
    expect(Date.now() - started).toBeLessThan(3 * ATTEMPT_TIMEOUT_MS + 4_000);
    expect(result.invoke.status).toBe(200);
    expect(result.invoke.body.data).toMatchObject({ model_id: "backup", message: { content: "gpt-backup says: anyone there?" } });
    expect(result.stream.at(-1)).toMatchObject({ type: "completed", model_id: "backup" });
    expect(result.mute.at(-1)).toMatchObject({ type: "completed", model_id: "backup", message: { content: "Hello from gpt-backup" } });
    const fallbacks = (await ledger(runId)).filter((e) => e.type === "model.fallback");
    expect(fallbacks.map((e) => [e.data.model_id, e.data.operation])).toEqual([["hang", "invoke"], ["hang", "stream"], ["mute", "stream"]]);
    expect(fallbacks[0].data.error).toContain(`${ATTEMPT_TIMEOUT_MS} ms`);
  });

  it("without a fallback, a provider that never answers is a 502 after the attempt timeout", async () => {
    const started = Date.now();
    const { result } = await inRun("alone", async ({ api }) => api("model.invoke", { model_id: "hang", messages: user("hello?") }));
    expect([result.status, result.body.error.code, result.body.error.retryable]).toEqual([502, "runtime_error", true]);
    expect(Date.now() - started).toBeLessThan(ATTEMPT_TIMEOUT_MS + 4_000);
  });
});

describe("knowledge retrieval", () => {
  it("an endpoint that never answers fails after the attempt timeout, not at the run's deadline", async () => {
    const started = Date.now();
    const { result, runId } = await inRun("retrieve", async ({ api }) => api("knowledge.retrieve", { kb_id: "kb", query: "hang" }));
    expect([result.status, result.body.error.code]).toEqual([502, "runtime_error"]);
    expect(result.body.error.message).toContain(`${ATTEMPT_TIMEOUT_MS} ms`);
    expect(Date.now() - started).toBeLessThan(ATTEMPT_TIMEOUT_MS + 4_000);
    expect((await ledger(runId)).find((e) => e.type === "knowledge.failed")?.data).toMatchObject({ kb_id: "kb", code: "runtime_error" });
  });
});

describe("model.stream endings", () => {
  it("a stream that closes without [DONE] or a finish reason ends with an error line, recorded as model.failed", async () => {
    const { result, runId } = await inRun("closes-early", async ({ raw }) => lines(await raw("model.stream", { model_id: "chat", messages: user(STREAM_CLOSES_EARLY) })));
    expect(result.slice(0, -1).map((l: any) => l.type)).toEqual(["delta", "delta"]);
    expect(result.at(-1)).toMatchObject({ type: "error", error: { code: "stream_closed", retryable: true, details: { model_id: "chat" } } });
    const entries = await ledger(runId);
    expect(entries.filter((e) => e.type === "model.usage")).toEqual([]);
    expect(entries.filter((e) => e.type === "model.failed").map((e) => [e.data.model_id, e.data.operation, e.data.code])).toEqual([["chat", "stream", "stream_closed"]]);
  });

  it("an error chunk mid-stream ends it with an error line, the key scrubbed", async () => {
    const { result, runId } = await inRun("error-chunk", async ({ raw }) => lines(await raw("model.stream", { model_id: "chat", messages: user(STREAM_ERROR_CHUNK) })));
    expect(result.slice(0, -1).map((l: any) => l.type)).toEqual(["delta", "delta"]);
    const last = result.at(-1);
    expect(last).toMatchObject({ type: "error", error: { code: "provider_error", retryable: true } });
    expect(last.error.message).toContain("upstream overloaded");
    expect(JSON.stringify(result)).not.toContain(KEYS.main);
    const entries = await ledger(runId);
    expect(entries.filter((e) => e.type === "model.usage")).toEqual([]);
    // Shaped as every model.failed is (model-fallback.ts): its words under `error`, as the runner's error line has them.
    expect(entries.find((e) => e.type === "model.failed")?.data).toEqual({ model_id: "chat", requested_model_id: "chat", operation: "stream", code: "provider_error", error: last.error.message });
  });

  it("a runner that closes a model stream closes the provider's: nothing keeps streaming, and the ledger says it was cancelled", async () => {
    const abandoned = provider.state.streamsAbandoned;
    const { result, runId } = await inRun("cancels", async ({ raw }) => {
      const res = await raw("model.stream", { model_id: "chat", messages: user(STREAM_ENDLESS) });
      const reader = res.body!.getReader();
      let received = "";
      while (received.split("\n").length < 5) received += new TextDecoder().decode((await reader.read()).value);
      await reader.cancel();
      const deadline = Date.now() + 5_000;
      while (provider.state.streamsAbandoned === abandoned && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      return { closedUpstream: provider.state.streamsAbandoned - abandoned, firstLine: JSON.parse(received.split("\n")[0]!) };
    });
    expect(result).toEqual({ closedUpstream: 1, firstLine: expect.objectContaining({ type: "delta" }) });
    const entries = await ledger(runId);
    expect(entries.filter((e) => e.type === "model.usage")).toEqual([]);
    expect(entries.find((e) => e.type === "model.failed")?.data).toMatchObject({ model_id: "chat", operation: "stream", code: "cancelled" });
  });

  it("a model stream still open when its run is cancelled is stopped, and the ledger says so before the run's end", async () => {
    const abandoned = provider.state.streamsAbandoned;
    const opened = deferred<string>();
    const release = deferred();
    const running = runner
      .run(host, "cancelled-mid-stream", async (_api, ctx, _emit, raw) => {
        const res = await raw("model.stream", { model_id: "chat", messages: user(STREAM_ENDLESS) });
        await res.body!.getReader().read();
        opened.resolve(ctx.run_id);
        // Holds the stream open, unread, until the test is done with it.
        await release.promise;
        return null;
      })
      .catch((err: Error) => err.message);
    const runId = await opened.promise;
    expect((await host.admin("POST", `/v1/runs/${runId}/cancel`)).status).toBe(202);
    expect((await host.waitForRun(runId)).status).toBe("cancelled");
    const entries = await ledger(runId);
    // In ledger order: the stream's end, then the run's.
    expect(entries.slice(-2)).toEqual([
      expect.objectContaining({ type: "model.failed", data: expect.objectContaining({ model_id: "chat", operation: "stream", code: "runtime_error" }) }),
      expect.objectContaining({ type: "run.failed", data: expect.objectContaining({ code: "cancelled" }) }),
    ]);
    const deadline = Date.now() + 5_000;
    while (provider.state.streamsAbandoned === abandoned && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(provider.state.streamsAbandoned - abandoned).toBe(1);
    release.resolve();
    expect(await running).toContain("cancelled");
  });

  it("a finish reason without [DONE] is still a completed stream", async () => {
    const { result, runId } = await inRun("no-done", async ({ raw }) => lines(await raw("model.stream", { model_id: "chat", messages: user(STREAM_NO_DONE) })));
    expect(result.at(-1)).toMatchObject({ type: "completed", finish_reason: "stop", message: { content: "Hello from gpt-main" } });
    expect((await ledger(runId)).filter((e) => e.type === "model.usage")).toHaveLength(1);
  });

  it("a 200 answer that is not an event stream is a provider fault: fallback when there is one, else 502 invalid", async () => {
    const { result, runId } = await inRun("json-stream", async ({ raw }) => lines(await raw("model.stream", { model_id: "jsonish", messages: user("stream please") })));
    expect(result.at(-1)).toMatchObject({ type: "completed", model_id: "backup", message: { content: "Hello from gpt-backup" } });
    expect((await ledger(runId)).find((e) => e.type === "model.fallback")?.data).toMatchObject({ model_id: "jsonish", next_model_id: "backup", operation: "stream" });

    const { result: alone } = await inRun("alone", async ({ api }) => api("model.stream", { model_id: "jsonish", messages: user("stream please") }));
    expect([alone.status, alone.body.error.code, alone.body.error.retryable]).toEqual([502, "runtime_error", true]);
    expect(alone.body.error.message).toContain("event stream");
  });
});

describe("answers whose bodies stall or trickle after their headers", () => {
  it("a model provider's stalled body is an attempt that timed out: fallback, or without one a retryable 502", async () => {
    const { result, runId } = await inRun("stalled-bodies", async ({ api }) => ({
      invoke: await within(4_000, api("model.invoke", { model_id: "stall", messages: user("answer slowly") })),
      rerank: await within(4_000, api("model.rerank", { model_id: "rr-stall", query: "q", documents: ["a", "b"] })),
    }));
    expect(result.invoke.body?.data).toMatchObject({ model_id: "backup", message: { content: "gpt-backup says: answer slowly" } });
    expect([result.rerank.status, result.rerank.body?.error.code, result.rerank.body?.error.retryable]).toEqual([502, "runtime_error", true]);
    expect(result.rerank.body.error.message).toContain(`${ATTEMPT_TIMEOUT_MS} ms`);
    const entries = await ledger(runId);
    expect(entries.find((e) => e.type === "model.fallback")?.data).toMatchObject({ model_id: "stall", operation: "invoke" });
    expect(entries.find((e) => e.type === "model.failed")?.data).toMatchObject({ model_id: "rr-stall", operation: "rerank", code: "runtime_error" });
  });

  it("a retrieval endpoint that stalls or trickles its answer fails within the attempt timeout, recorded", async () => {
    const started = Date.now();
    const { result, runId } = await inRun("stalled-retrieval", async ({ api }) => ({
      stall: await within(4_000, api("knowledge.retrieve", { kb_id: "kb", query: "stall" })),
      trickle: await within(4_000, api("knowledge.retrieve", { kb_id: "kb", query: "trickle" })),
    }));
    for (const answer of [result.stall, result.trickle]) {
      expect([answer.status, answer.body?.error.code, answer.body?.error.retryable]).toEqual([502, "runtime_error", true]);
      expect(answer.body.error.message).toContain(`${ATTEMPT_TIMEOUT_MS} ms`);
    }
    expect(Date.now() - started).toBeLessThan(2 * ATTEMPT_TIMEOUT_MS + 4_000);
    expect((await ledger(runId)).filter((e) => e.type === "knowledge.failed").map((e) => e.data.code)).toEqual(["runtime_error", "runtime_error"]);
  });

  it("a model stream that goes silent mid-way ends with a retryable error line after MODEL_STREAM_IDLE_TIMEOUT_MS, and the provider is let go", async () => {
    const abandoned = provider.state.streamsAbandoned;
    const { result, runId } = await inRun("stalled-stream", async ({ raw }) => within(4_000, raw("model.stream", { model_id: "chat", messages: user(STREAM_STALLS) }).then(lines)));
    expect(result).not.toBe("unanswered");
    expect(result.slice(0, -1).map((l: any) => l.type)).toEqual(["delta", "delta"]);
    expect(result.at(-1)).toMatchObject({ type: "error", error: { code: "runtime_error", retryable: true, details: { model_id: "chat" } } });
    expect(result.at(-1).error.message).toContain(`${STREAM_IDLE_MS} ms`);
    expect((await ledger(runId)).find((e) => e.type === "model.failed")?.data).toMatchObject({ model_id: "chat", operation: "stream", code: "runtime_error" });
    for (const end = Date.now() + 3_000; provider.state.streamsAbandoned === abandoned && Date.now() < end; ) await new Promise((r) => setTimeout(r, 20));
    expect(provider.state.streamsAbandoned - abandoned).toBe(1);
  });
});

describe("MCP servers", () => {
  it("a server that never answers a session's DELETE holds neither discovery nor a tool call", async () => {
    let started = Date.now();
    await register("/v1/admin/mcp-servers", { name: "sticky", url: sticky.url, headers: { authorization: `Bearer ${KEYS.mcp}` } });
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(sticky.calls.some((c) => c.method === "DELETE")).toBe(true);
    await agent("mcp", { type: "conversation", id: "sticky" }, { tools: ["sticky.add", "sticky.huge"] });

    started = Date.now();
    const deletes = sticky.calls.filter((c) => c.method === "DELETE").length;
    const deletesDuringRun = () => sticky.calls.filter((c) => c.method === "DELETE").length - deletes;
    const { result: inside } = await inRun("sticky", async ({ api }) => ({
      call: await api("tool.call", { tool_name: "sticky.add", parameters: { a: 2, b: 2 } }),
      deletes: deletesDuringRun(),
    }));
    const result = inside.call;
    expect(result.status).toBe(200);
    // The session outlives the call: it is ended with the run, not before.
    expect(inside.deletes).toBe(0);
    expect(result.body.data.result).toMatchObject({ structuredContent: { sum: 4 }, isError: false });
    expect(Date.now() - started).toBeLessThan(4_000);
    // The run's session is ended once the run is over (the DELETE is sent, and not waited for long).
    for (const end = Date.now() + 3_000; sticky.calls.filter((c) => c.method === "DELETE").length === deletes && Date.now() < end; ) await new Promise((r) => setTimeout(r, 20));
    expect(sticky.calls.filter((c) => c.method === "DELETE").length).toBe(deletes + 1);
  });

  it("an MCP answer larger than RESOURCE_RESPONSE_MAX_BYTES is refused, not passed on", async () => {
    const started = Date.now();
    const { result: both, runId } = await inRun("sticky", async ({ api }) => ({
      huge: await api("tool.call", { tool_name: "sticky.huge", parameters: {} }),
      // The oversized answer ended that session; the run's next call opens another.
      after: await api("tool.call", { tool_name: "sticky.add", parameters: { a: 1, b: 2 } }),
    }));
    const result = both.huge;
    expect([result.status, result.body.error.code]).toEqual([502, "runtime_error"]);
    expect(result.body.error.message).toContain(`${MAX_BYTES} bytes`);
    expect([both.after.status, both.after.body.data?.result?.structuredContent]).toEqual([200, { sum: 3 }]);
    expect(Date.now() - started).toBeLessThan(4_000);
    expect((await ledger(runId)).find((e) => e.type === "tool.call.completed")?.data.error).toMatchObject({ code: "runtime_error" });
  });
});
