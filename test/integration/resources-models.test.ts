import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HOLD_STREAM } from "../support/fake-provider";
import { startResourcesFixture, WEATHER_PARAMS, type ResourcesFixture } from "../support/resources-fixture";

/** Host-held models through the Host API (PROTOCOL §6, §8): what a run is granted, invoke, stream, fallback, rerank. */

let world: ResourcesFixture;
beforeAll(async () => {
  world = await startResourcesFixture();
});
afterAll(async () => {
  await world?.close();
});

describe("ctx.resources", () => {
  it("lists exactly the effective grants, with their operations", async () => {
    const { result: full } = await world.inRun("grants-full", async ({ ctx }) => ctx.resources);
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

    const { result: narrow } = await world.inRun("narrow", async ({ ctx }) => ctx.resources);
    expect(narrow.models.map((m: any) => [m.model_id, m.operations])).toEqual([["flaky", ["invoke"]], ["chat", ["invoke"]]]);
    expect(narrow.tools.map((t: any) => [t.tool_name, t.operations])).toEqual([["weather", ["detail"]]]);
    expect(narrow.knowledge_bases).toEqual([]);
  });
});

describe("models", () => {
  it("invokes a model: one message back (tool calls included), the provider's usage in the ledger", async () => {
    const { result, runId } = await world.inRun("invoke", async ({ api }) => ({
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
    const sent = world.provider.calls.filter((c) => c.body.messages?.[0]?.content === "hi");
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({ path: "/v1/chat/completions", authorization: `Bearer ${world.SECRETS.main}`, body: { model: "gpt-main", temperature: 0.2, stream: false } });
    expect(world.provider.calls.find((c) => c.body.messages?.[0]?.content === "weather?")?.body.tools[0]).toMatchObject({ type: "function", function: { name: "weather" } });

    const usage = (await world.ledger(runId)).filter((e) => e.type === "model.usage");
    expect(usage).toHaveLength(2);
    expect(usage[0]).toMatchObject({ origin: "host", data: { model_id: "chat", operation: "invoke", prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 } });
  });

  it("streams NDJSON chunks as the provider produces them: the first reaches the runner before the provider finishes", async () => {
    const { result, runId } = await world.inRun("stream", async ({ raw }) => {
      const res = await raw("model.stream", { model_id: "chat", messages: [{ role: "user", content: HOLD_STREAM }] });
      const lines: any[] = [];
      let finishedAtFirstDelta: number | undefined;
      const finishedBefore = world.provider.state.streamsFinished;
      for await (const line of world.ndjson(res)) {
        if (line.type === "delta" && finishedAtFirstDelta === undefined) {
          finishedAtFirstDelta = world.provider.state.streamsFinished;
          world.provider.releaseStream(); // the world.provider only finishes once the world.runner has seen a chunk
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
    expect(world.provider.calls.find((c) => c.body.messages?.[0]?.content === HOLD_STREAM)?.body).toMatchObject({ stream: true, stream_options: { include_usage: true } });
    expect((await world.ledger(runId)).find((e) => e.type === "model.usage")?.data).toMatchObject({ model_id: "chat", operation: "stream", total_tokens: 12 });
  });

  it("falls back to the next granted model when the provider fails, for invoke and stream", async () => {
    const { result, runId } = await world.inRun("fallback", async ({ api, raw }) => {
      const invoke = await api("model.invoke", { model_id: "flaky", messages: [{ role: "user", content: "fall back" }] });
      const lines = [];
      for await (const line of world.ndjson(await raw("model.stream", { model_id: "flaky", messages: [{ role: "user", content: "stream fall back" }] }))) lines.push(line);
      return { invoke, last: lines.at(-1) };
    });
    expect(result.invoke.status).toBe(200);
    expect(result.invoke.body.data).toMatchObject({ model_id: "backup", message: { content: "gpt-backup says: fall back" } });
    expect(result.last).toMatchObject({ type: "completed", model_id: "backup", message: { content: "Hello from gpt-backup" } });
    // The failing provider was tried first, each time.
    const tried = world.provider.calls.filter((c) => String(c.body.messages?.[0]?.content).includes("fall back")).map((c) => c.body.model);
    expect(tried).toEqual(["gpt-flaky", "gpt-backup", "gpt-flaky", "gpt-backup"]);

    const entries = await world.ledger(runId);
    const fallbacks = entries.filter((e) => e.type === "model.fallback");
    expect(fallbacks.map((e) => [e.data.model_id, e.data.next_model_id, e.data.operation])).toEqual([["flaky", "backup", "invoke"], ["flaky", "backup", "stream"]]);
    expect(fallbacks[0].data.error).toContain("HTTP 503");
    expect(entries.filter((e) => e.type === "model.usage").map((e) => [e.data.model_id, e.data.requested_model_id])).toEqual([["backup", "flaky"], ["backup", "flaky"]]);
  });

  it("without a fallback, a provider error is a 502 whose message has the key scrubbed", async () => {
    const { result, runId } = await world.inRun("narrow", async ({ api }) => ({
      invoke: await api("model.invoke", { model_id: "flaky", messages: [{ role: "user", content: "no fallback" }] }),
      stream: await api("model.stream", { model_id: "chat", messages: [{ role: "user", content: "not granted" }] }),
    }));
    expect(result.invoke.status).toBe(502);
    expect(result.invoke.body.error).toMatchObject({ code: "runtime_error", retryable: true, details: { model_id: "flaky", upstream_status: 503 } });
    expect(result.invoke.body.error.message).toContain("[redacted]");
    expect(JSON.stringify(result.invoke)).not.toContain(world.SECRETS.flaky);
    // The manifest asks for stream; the agent's allow list does not.
    expect([result.stream.status, result.stream.body.error.code]).toEqual([403, "unauthorized"]);
    expect((await world.ledger(runId)).find((e) => e.type === "model.failed")?.data).toMatchObject({ model_id: "flaky", operation: "invoke", code: "runtime_error" });
  });

  it("reranks documents with a rerank model", async () => {
    const { result, runId } = await world.inRun("rerank", async ({ api }) =>
      api("model.rerank", { model_id: "reranker", query: "cats", documents: ["dogs", "about cats", "birds"], top_k: 2 }),
    );
    expect(result.body.data).toEqual({ model_id: "reranker", results: [{ index: 1, score: 0.9 }, { index: 2, score: 0.5 }], usage: { prompt_tokens: null, completion_tokens: null, total_tokens: 42 } });
    expect(world.provider.calls.find((c) => c.path === "/v1/rerank")?.body).toEqual({ model: "rr-1", query: "cats", documents: ["dogs", "about cats", "birds"], top_n: 2 });
    expect((await world.ledger(runId)).find((e) => e.type === "model.usage")?.data).toMatchObject({ model_id: "reranker", operation: "rerank", total_tokens: 42 });
  });
});
