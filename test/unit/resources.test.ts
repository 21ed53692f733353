import { describe, expect, it } from "vitest";
import { ResourcePolicySchema } from "../../src/agents/policy";
import { chatStreamToNdjson, type StreamEnd } from "../../src/resources/chat-stream";
import { toChatRequest, ModelInputError } from "../../src/resources/chat-request";
import { grantResources } from "../../src/resources/grants";
import { redact, secretFragments } from "../../src/resources/secrets";

describe("effective resource grants", () => {
  const found = {
    models: [
      { modelId: "chat", name: "Chat", kind: "llm", contextWindow: 8000 },
      { modelId: "ranker", name: "Ranker", kind: "rerank", contextWindow: null },
      { modelId: "embed", name: "Embed", kind: "embedding", contextWindow: null },
      { modelId: "spare", name: "Spare", kind: "llm", contextWindow: null },
    ],
    tools: [{ toolName: "calc.add", description: "add", parametersJson: '{"type":"object"}' }],
    knowledgeBases: [{ kbId: "docs", name: "Docs", description: null }],
  };
  const policy = ResourcePolicySchema.parse({ models: ["chat", "ranker", "embed", "gone"], fallback_models: ["spare", "ranker"], tools: ["calc.add"], knowledge_bases: ["docs"] });

  it("is manifest permissions ∩ granted ids ∩ what each resource can do, in policy order", () => {
    const granted = grantResources({ models: ["invoke", "rerank"], tools: ["call"], knowledge_bases: ["retrieve"] }, policy, found);
    expect(granted.models).toEqual([
      { model_id: "chat", name: "Chat", kind: "llm", context_window: 8000, operations: ["invoke"] },
      { model_id: "ranker", name: "Ranker", kind: "rerank", context_window: null, operations: ["rerank"] },
      { model_id: "spare", name: "Spare", kind: "llm", context_window: null, operations: ["invoke"] },
    ]);
    // An embedding model has no Host API operation; a deleted id grants nothing.
    expect(granted.models.map((m) => m.model_id)).not.toContain("embed");
    expect(granted.fallback_models).toEqual(["spare", "ranker"]);
    expect(granted.tools).toEqual([{ tool_name: "calc.add", description: "add", parameters: { type: "object" }, operations: ["call"] }]);
    expect(granted.knowledge_bases).toEqual([{ kb_id: "docs", name: "Docs", description: null, operations: ["retrieve"] }]);
  });

  it("grants nothing of a group the manifest does not ask for", () => {
    const granted = grantResources({}, policy, found);
    expect(granted).toEqual({ models: [], tools: [], knowledge_bases: [], fallback_models: [] });
  });
});

describe("chat requests", () => {
  it("translates content elements and wraps bare tool definitions; the runner cannot override the model", () => {
    const req = toChatRequest({
      messages: [{ role: "user", content: [{ type: "text", text: "look" }, { type: "image", url: "https://x.example/a.png" }] }],
      tools: [{ name: "f", parameters: { type: "object" } }, { type: "function", function: { name: "g" } }],
      extra: { temperature: 0, model: "other", stream: true },
    });
    expect(req.messages[0].content).toEqual([{ type: "text", text: "look" }, { type: "image_url", image_url: { url: "https://x.example/a.png" } }]);
    expect(req.tools).toEqual([{ type: "function", function: { name: "f", description: undefined, parameters: { type: "object" } } }, { type: "function", function: { name: "g" } }]);
    expect(req.extra).toEqual({ temperature: 0 });
    expect(() => toChatRequest({ messages: [{ role: "user", content: [{ type: "audio", artifact_id: "a" }] }] })).toThrow(ModelInputError);
  });
});

function sse(chunks: string[]): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return new ReadableStream({
    start(controller) {
      for (const c of chunks) controller.enqueue(encoder.encode(c));
      controller.close();
    },
  });
}

async function collect(body: ReadableStream<Uint8Array>): Promise<{ lines: any[]; end: StreamEnd | undefined }> {
  let end: StreamEnd | undefined;
  const out = chatStreamToNdjson(body, {
    modelId: "m",
    maxLineBytes: 1024,
    maxBytes: 1 << 20,
    describeError: (err) => ({ code: "runtime_error", message: redact(String(err), ["sk-secret-123"]), retryable: true }),
    onEnd: async (e) => {
      end = e;
    },
    onCancel: () => {},
  });
  const text = await new Response(out).text();
  return { lines: text.trim().split("\n").map((l) => JSON.parse(l)), end };
}

const data = (v: unknown) => `data: ${JSON.stringify(v)}\n\n`;

describe("model.stream framing", () => {
  it("assembles tool calls streamed in fragments, across network chunks split mid-line", async () => {
    const frames = [
      data({ choices: [{ delta: { role: "assistant", tool_calls: [{ index: 0, id: "c1", type: "function", function: { name: "get_", arguments: "" } }] } }] }),
      data({ choices: [{ delta: { tool_calls: [{ index: 0, function: { name: "weather", arguments: '{"ci' } }] } }] }),
      data({ choices: [{ delta: { tool_calls: [{ index: 0, function: { arguments: 'ty":"Oslo"}' } }] }, finish_reason: "tool_calls" }] }),
      "data: [DONE]\n\n",
    ].join("");
    const { lines, end } = await collect(sse([frames.slice(0, 37), frames.slice(37, 150), frames.slice(150)]));
    expect(lines.filter((l) => l.type === "delta")).toHaveLength(3);
    expect(lines.at(-1)).toEqual({
      type: "completed",
      model_id: "m",
      message: { role: "assistant", content: "", tool_calls: [{ id: "c1", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } }] },
      finish_reason: "tool_calls",
      usage: null,
    });
    expect(end?.result?.finish_reason).toBe("tool_calls");
  });

  it("ends with an error line (secrets scrubbed) when the provider sends garbage", async () => {
    const { lines, end } = await collect(sse([data({ choices: [{ delta: { content: "a" } }] }), "data: not json sk-secret-123\n\n"]));
    expect(lines[0]).toEqual({ type: "delta", chunk: { role: "assistant", content: "a" } });
    expect(lines[1]).toMatchObject({ type: "error", error: { code: "runtime_error", retryable: true } });
    expect(lines[1].error.message).not.toContain("sk-secret-123");
    expect(end?.error?.code).toBe("runtime_error");
  });
});

describe("secret scrubbing", () => {
  it("removes whole values and the credential part of header values", () => {
    const fragments = secretFragments(["Bearer tok-abcdef123", "sk-1", null]);
    expect(redact("got Bearer tok-abcdef123 and tok-abcdef123", fragments)).toBe("got [redacted] and [redacted]");
    // Too short to scrub safely; the scheme word is not a secret.
    expect(fragments).not.toContain("sk-1");
    expect(fragments).not.toContain("Bearer");
  });
});
