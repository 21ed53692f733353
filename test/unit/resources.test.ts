import { describe, expect, it } from "vitest";
import { ResourcePolicySchema } from "../../src/agents/policy";
import { streamError } from "../../src/host-api/actions/models";
import { ApiError } from "../../src/host-api/errors";
import { chatStreamToNdjson, type StreamEnd } from "../../src/resources/chat-stream";
import { toChatRequest, ModelInputError } from "../../src/resources/chat-request";
import { grantResources, identitiesOf } from "../../src/resources/grants";
import { normalizeBaseUrl } from "../../src/lib/url";
import { maskUrl, redact, redactValue, secretFragments, StreamRedactor, urlSecrets } from "../../src/resources/secrets";

describe("effective resource grants", () => {
  const found = {
    models: [
      { modelId: "chat", name: "Chat", kind: "llm", contextWindow: 8000, createdAt: 1 },
      { modelId: "ranker", name: "Ranker", kind: "rerank", contextWindow: null, createdAt: 2 },
      { modelId: "embed", name: "Embed", kind: "embedding", contextWindow: null, createdAt: 3 },
      { modelId: "spare", name: "Spare", kind: "llm", contextWindow: null, createdAt: 4 },
    ],
    tools: [{ toolName: "calc.add", description: "add", parametersJson: '{"type":"object"}', createdAt: 5 }],
    knowledgeBases: [{ kbId: "docs", name: "Docs", description: null, createdAt: 6 }],
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

  it("keeps which resource each granted id named, for the granted ones only", () => {
    const granted = grantResources({ models: ["invoke", "rerank"], tools: ["call"], knowledge_bases: ["retrieve"] }, policy, found);
    expect(identitiesOf(granted, found)).toEqual({ models: { chat: 1, ranker: 2, spare: 4 }, tools: { "calc.add": 5 }, knowledge_bases: { docs: 6 } });
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

const KEY = "sk-secret-123";

/** The stream as `model.stream` builds it: the real error lines of actions/models.ts, for a model whose key is KEY. */
/**
 * `signal`: what an error line says about an aborted call; `call`: the call's signal whose abort ends the
 * stream (in models.ts both are the call's signal; apart here to test each).
 */
function ndjsonOf(body: ReadableStream<Uint8Array>, opts: { signal?: AbortSignal; call?: AbortSignal; onEnd?: (e: StreamEnd) => Promise<void>; onCancel?: () => void } = {}) {
  const signal = opts.signal ?? new AbortController().signal;
  return chatStreamToNdjson(body, {
    modelId: "m",
    maxLineBytes: 1024,
    maxBytes: 1 << 20,
    secrets: secretFragments([KEY]),
    describeError: (err) => streamError(err, signal, secretFragments([KEY])),
    onEnd: opts.onEnd ?? (async () => {}),
    onCancel: opts.onCancel ?? (() => {}),
    signal: opts.call ?? new AbortController().signal,
  });
}

async function collect(body: ReadableStream<Uint8Array>, signal?: AbortSignal): Promise<{ lines: any[]; end: StreamEnd | undefined }> {
  let end: StreamEnd | undefined;
  const text = await new Response(ndjsonOf(body, { signal, onEnd: async (e) => void (end = e) }).body).text();
  return { lines: text.trim().split("\n").map((l) => JSON.parse(l)), end };
}

/** A provider stream that sends `first` and then nothing, until cancelled (which it counts). */
function stalledProvider(first: string) {
  const state = { cancelled: 0 };
  const body = new ReadableStream<Uint8Array>({
    start: (c) => c.enqueue(new TextEncoder().encode(first)),
    cancel: () => void state.cancelled++,
  });
  return { body, state };
}

const data = (v: unknown) => `data: ${JSON.stringify(v)}\n\n`;
const DONE = "data: [DONE]\n\n";

describe("model.stream framing", () => {
  it("assembles tool calls streamed in fragments, across network chunks split mid-line", async () => {
    const frames = [
      data({ choices: [{ delta: { role: "assistant", tool_calls: [{ index: 0, id: "c1", type: "function", function: { name: "get_", arguments: "" } }] } }] }),
      data({ choices: [{ delta: { tool_calls: [{ index: 0, function: { name: "weather", arguments: '{"ci' } }] } }] }),
      data({ choices: [{ delta: { tool_calls: [{ index: 0, function: { arguments: 'ty":"Oslo"}' } }] }, finish_reason: "tool_calls" }] }),
      DONE,
    ].join("");
    const { lines, end } = await collect(sse([frames.slice(0, 37), frames.slice(37, 150), frames.slice(150)]));
    expect(lines.filter((l) => l.type === "delta")).toHaveLength(3);
    expect(lines.at(-1)).toEqual({
      type: "completed",
      model_id: "m",
      // No content streamed: null, as model.invoke gives a tool-call-only message.
      message: { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } }] },
      finish_reason: "tool_calls",
      usage: null,
    });
    expect(end?.result?.finish_reason).toBe("tool_calls");
  });

  it("assembles parallel tool calls in index order, and refuses a fragment no call can be (a huge or negative index, null) with an error line, at once", async () => {
    const call = (index: unknown, name: string) => data({ choices: [{ delta: { tool_calls: [{ index, id: name, type: "function", function: { name, arguments: "{}" } }] } }] });
    const parallel = await collect(sse([call(1, "b"), call(0, "a"), data({ choices: [{ delta: {}, finish_reason: "tool_calls" }] }), DONE]));
    expect(parallel.lines.at(-1).message.tool_calls.map((c: { id: string }) => c.id)).toEqual(["a", "b"]);

    for (const fragment of [call(2 ** 31, "x"), call(-1, "x"), call(0.5, "x"), data({ choices: [{ delta: { tool_calls: [null] } }] })]) {
      const started = performance.now();
      const { lines, end } = await collect(sse([fragment, data({ choices: [{ delta: {}, finish_reason: "tool_calls" }] }), DONE]));
      expect(performance.now() - started).toBeLessThan(1000);
      // As any chunk the provider got wrong (not JSON, not an object): the stream's one error line, retryable.
      expect(lines).toEqual([{ type: "error", error: { code: "runtime_error", message: expect.stringMatching(/tool call fragment/), retryable: true, details: { model_id: "m" } } }]);
      expect(end?.error?.message).toMatch(/tool call fragment/);
    }
  });

  it("an error chunk ends the stream with a provider_error line, the key scrubbed, after the deltas of the same network chunk", async () => {
    const { lines, end } = await collect(sse([data({ choices: [{ delta: { content: "a" } }] }) + data({ error: { message: `quota exceeded for key ${KEY}`, type: "insufficient_quota" } }) + DONE]));
    expect(lines[0]).toEqual({ type: "delta", chunk: { role: "assistant", content: "a" } });
    expect(lines[1]).toMatchObject({ type: "error", error: { code: "provider_error", retryable: true, details: { model_id: "m" } } });
    expect(lines[1].error.message).toBe("the model provider reported an error mid-stream: quota exceeded for key [redacted] (insufficient_quota)");
    expect(lines).toHaveLength(2);
    expect(end).toEqual({ error: { code: "provider_error", message: lines[1].error.message } });
  });

  it("never streams a key the provider echoes a few characters per delta, and loses none of the other text", async () => {
    const quoted = `you used ${KEY} ok`;
    const frames = quoted.match(/.{1,5}/g)!.map((piece) => data({ choices: [{ delta: { content: piece } }] }));
    const { lines } = await collect(sse([...frames, data({ choices: [{ delta: {}, finish_reason: "stop" }] }), DONE]));
    const streamed = lines.filter((l) => l.type === "delta").map((l) => l.chunk.content).join("");
    expect(streamed).toBe("you used [redacted] ok");
    expect(lines.at(-1)).toMatchObject({ type: "completed", message: { content: "you used [redacted] ok" } });
  });

  it("a stream that stops without [DONE] or a finish reason is not completed", async () => {
    const { lines, end } = await collect(sse([data({ choices: [{ delta: { content: "Hel" } }] })]));
    expect(lines.map((l) => l.type)).toEqual(["delta", "error"]);
    expect(lines[1].error).toMatchObject({ code: "stream_closed", retryable: true });
    expect(end?.result).toBeUndefined();
    expect(end?.error?.code).toBe("stream_closed");
    // A finish reason is enough, [DONE] or not.
    const finished = await collect(sse([data({ choices: [{ delta: { content: "Hi" }, finish_reason: "stop" }] })]));
    expect(finished.lines.at(-1)).toMatchObject({ type: "completed", finish_reason: "stop", message: { content: "Hi" } });
  });

  it("garbage from the provider is a retryable runtime_error; an aborted call reports why it was aborted", async () => {
    const garbage = await collect(sse([data({ choices: [{ delta: { content: "a" } }] }), "data: not json\n\n"]));
    expect(garbage.lines[1]).toMatchObject({ type: "error", error: { code: "runtime_error", retryable: true } });

    const call = new AbortController();
    call.abort(new ApiError("deadline_exceeded", "the run's deadline passed during the call"));
    const aborted = await collect(sse([data({ choices: [{ delta: { content: "a" } }] }), "data: not json\n\n"]), call.signal);
    expect(aborted.lines[1].error).toMatchObject({ code: "deadline_exceeded", retryable: false, message: "the run's deadline passed during the call" });
  });

  it("records the end once when the runner cancels while the end is being recorded", async () => {
    const ends: StreamEnd[] = [];
    let release!: () => void;
    const recording = new Promise<void>((r) => (release = r));
    const out = ndjsonOf(sse([data({ choices: [{ delta: { content: "a" }, finish_reason: "stop" }] }), DONE]), {
      onEnd: async (e) => {
        ends.push(e);
        await recording; // a slow ledger write
      },
    });
    const reader = out.body.getReader();
    const decoder = new TextDecoder();
    let text = "";
    while (!text.includes('"completed"')) text += decoder.decode((await reader.read()).value);
    // The completed line is out and its end is being recorded: the runner goes away now.
    const cancelled = reader.cancel();
    release();
    await cancelled;
    expect(ends).toHaveLength(1);
    expect(ends[0].result?.finish_reason).toBe("stop");
  });
});

describe("model.stream ends nobody reads", () => {
  it("the call's abort (the run ended) ends a stream its runner stopped reading: the end is recorded, the provider let go", async () => {
    const provider = stalledProvider(data({ choices: [{ delta: { content: "a" } }] }));
    const call = new AbortController();
    const ends: StreamEnd[] = [];
    const stream = ndjsonOf(provider.body, { signal: call.signal, call: call.signal, onEnd: async (e) => void ends.push(e) });
    const reader = stream.body.getReader();
    expect(JSON.parse(new TextDecoder().decode((await reader.read()).value))).toMatchObject({ type: "delta" });
    // The runner reads no more; the run ends.
    call.abort(new ApiError("runtime_error", "the run was stopped during the call"));
    await stream.ended;
    expect(ends).toEqual([{ error: { code: "runtime_error", message: "the run was stopped during the call" } }]);
    expect(provider.state.cancelled).toBe(1);
    // A reader that comes back finds the error line, then the end.
    expect(JSON.parse(new TextDecoder().decode((await reader.read()).value))).toMatchObject({ type: "error", error: { code: "runtime_error" } });
    expect((await reader.read()).done).toBe(true);
  });

  it("close (the runner's request went away) stops the provider call, records a cancel, and ends the stream", async () => {
    const provider = stalledProvider(data({ choices: [{ delta: { content: "a" } }] }));
    const ends: StreamEnd[] = [];
    let cancelledCall = 0;
    const stream = ndjsonOf(provider.body, { onEnd: async (e) => void ends.push(e), onCancel: () => void cancelledCall++ });
    const reader = stream.body.getReader();
    await reader.read();
    await stream.close();
    await stream.ended;
    expect([ends, cancelledCall, provider.state.cancelled]).toEqual([[{ error: { code: "cancelled", message: "the runner closed the stream" } }], 1, 1]);
    // Ended, not errored: workerd would report the error as an uncaught exception.
    expect(await reader.read()).toEqual({ done: true, value: undefined });
    // Closing again, or a cancel after it, records nothing more.
    await stream.close();
    await reader.cancel().catch(() => {});
    expect(ends).toHaveLength(1);
  });

  it("a stream that ended before its close records only its own end", async () => {
    const ends: StreamEnd[] = [];
    let cancelledCall = 0;
    const stream = ndjsonOf(sse([data({ choices: [{ delta: { content: "a" }, finish_reason: "stop" }] }), DONE]), { onEnd: async (e) => void ends.push(e), onCancel: () => void cancelledCall++ });
    expect(await new Response(stream.body).text()).toContain('"completed"');
    await stream.close();
    expect([ends.map((e) => e.result?.finish_reason), cancelledCall]).toEqual([["stop"], 0]);
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

  it("scrubs the leaves of a JSON value, whatever the secret's characters, without breaking numbers", () => {
    const quoted = 'ab"cd\\ef-12';
    const numeric = "4711000";
    const value = { echo: `key=${quoted}`, [`k-${quoted}`]: [quoted, { n: 47110001, m: 12, s: `${numeric}!` }], ok: true, none: null };
    expect(JSON.stringify(value)).not.toContain(quoted); // why scrubbing serialised JSON misses it
    expect(redactValue(value, secretFragments([quoted, numeric]))).toEqual({
      echo: "key=[redacted]",
      "k-[redacted]": ["[redacted]", { n: "[redacted]", m: 12, s: "[redacted]!" }],
      ok: true,
      none: null,
    });
    expect(redactValue({ a: 1 }, [])).toEqual({ a: 1 });
  });

  it("keeps a \"__proto__\" member of parsed JSON as a member, not the copy's prototype", () => {
    const value = JSON.parse('{"__proto__": {"kind": "entry sk-abcdef"}, "kept": 1}');
    const copy = redactValue(value, ["sk-abcdef"]) as Record<string, unknown>;
    expect(Object.keys(copy)).toEqual(["__proto__", "kept"]);
    expect(JSON.stringify(copy)).toBe('{"__proto__":{"kind":"entry [redacted]"},"kept":1}');
    expect(Object.getPrototypeOf(copy)).toBe(Object.prototype);
  });

  it("scrubs text arriving in pieces, holding back only a tail that may begin a secret", () => {
    const r = new StreamRedactor(["sk-abcdef", "tok-123456"]);
    expect(r.push("hello sk-")).toBe("hello ");
    expect(r.push("abc")).toBe("");
    expect(r.push("def and sk-x")).toBe("[redacted] and sk-x");
    expect(r.push(" tok-12")).toBe(" ");
    expect(r.flush()).toBe("tok-12");
    expect(r.flush()).toBe("");
    expect(new StreamRedactor([]).push("sk-")).toBe("sk-");
  });

  it("masks what may be a credential in an endpoint URL, and lists it for scrubbing", () => {
    const url = "https://user:pa55word@mcp.example/servers/AbCdEf0123456789xyZ/mcp?api_key=sk%2Dq%20t&lang=en&flag#frag";
    expect(maskUrl(url)).toBe("https://********@mcp.example/servers/********/mcp?api_key=********&lang=********&********#********");
    expect(urlSecrets(url)).toEqual(expect.arrayContaining(["user", "pa55word", "AbCdEf0123456789xyZ", "sk%2Dq%20t", "sk-q t", "flag", "frag"]));
    // Scrubbed from answers: a value named as a credential or shaped like one; not an ordinary setting the answers may mention.
    const settings = urlSecrets("https://kb.example/search?collection=handbook&api-version=2024-10-21&code=fn-key-1&x=AbCdEf0123456789xyZAbCdEf0123456789");
    expect(settings).toEqual(expect.arrayContaining(["fn-key-1", "AbCdEf0123456789xyZAbCdEf0123456789"]));
    expect(settings).not.toEqual(expect.arrayContaining(["handbook"]));
    expect(settings).not.toEqual(expect.arrayContaining(["2024-10-21"]));
    expect(urlSecrets(url)).not.toContain("en");
    // Names are not tokens; a URL with nothing to hide is shown as given.
    for (const plain of ["https://api.example/v1", "https://x.example/openai/deployments/gpt-4o-mini-2024-07-18/chat", "http://127.0.0.1:8080/mcp"]) {
      expect(maskUrl(plain)).toBe(plain);
      expect(urlSecrets(plain)).toEqual([]);
    }
    expect(maskUrl("https://hooks.example/t/3f2a9c1e-5b7d-4e0f-9a8b-0c1d2e3f4a5b")).toBe("https://hooks.example/t/********");
    expect(maskUrl("https://api.telegram.example/bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw/send")).toBe("https://api.telegram.example/********/send");
  });
});

describe("runner service addresses", () => {
  it("spells one address one way: scheme and host lower-cased, default port, trailing slashes and fragment left out; path case and query kept", () => {
    const spellings = ["http://svc.example/fn?code=K", "HTTP://Svc.Example:80/fn/?code=K", "http://svc.example/fn//?code=K#top"];
    expect(new Set(spellings.map(normalizeBaseUrl))).toEqual(new Set(["http://svc.example/fn?code=K"]));
    expect(["https://svc.example:443/", "https://svc.example", "https://svc.example:8443/"].map(normalizeBaseUrl)).toEqual(["https://svc.example", "https://svc.example", "https://svc.example:8443"]);
    expect(normalizeBaseUrl("http://svc.example/Fn")).toBe("http://svc.example/Fn");
    expect(normalizeBaseUrl("http://bücher.example/")).toBe("http://xn--bcher-kva.example");
  });
});
