import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listenLoopback, readBody, sendJson } from "../support/http-server";
import { startTestHost, type TestHost } from "../support/host";
import { runLedger, startScriptedRunner } from "../support/scripted-runner";

/**
 * A provider's SSE as model.stream relays it: an event with empty data is a keep-alive (README: keep-alives are no
 * answer), and an error the provider reports mid-stream is retryable only when it is the provider's own fault, as
 * model.invoke answers the same error (PROTOCOL §8 `retryable`): a runner must not repeat a call that cannot succeed.
 * A stream cut off before the provider finished the message says so (`stream_closed`), wherever the cut falls; one cut
 * after the finish reason, with only its usage and [DONE] lost, is the whole message. Bytes that are not UTF-8, an event
 * over the line limit and a stream over the answer cap are the provider's stream's faults, told as such, never in the
 * words of a runner's result stream.
 */
const KEY = "sk-model-stream-errors-0123456789abcdefABCDEF";
const LINE_LIMIT = 64 * 1024;
const ANSWER_CAP = 1024 * 1024;
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
let provider: Awaited<ReturnType<typeof listenLoopback>>;
const ev = (c: unknown) => `data: ${typeof c === "string" ? c : JSON.stringify(c)}\n\n`;
const d = (delta: Record<string, unknown>, finish: string | null = null) => ({ choices: [{ index: 0, delta, finish_reason: finish }] });

beforeAll(async () => {
  provider = await listenLoopback(async (req, res) => {
    const body = JSON.parse((await readBody(req)) || "{}");
    if (req.headers.authorization !== `Bearer ${KEY}`) return sendJson(res, 401, { error: "bad key" });
    switch (body.model) {
      case "emptydata":
        res.writeHead(200, { "content-type": "text/event-stream" });
        // An SSE event with an empty data buffer is not dispatched (WHATWG SSE): a keep-alive, not a chunk.
        return void res.end(ev(d({ role: "assistant", content: "Hel" })) + "data:\n\n" + "data: \n\n" + ev(d({ content: "lo" })) + ev(d({}, "stop")) + ev("[DONE]"));
      case "badreq-chunk":
        res.writeHead(200, { "content-type": "text/event-stream" });
        return void res.end(ev(d({ role: "assistant", content: "Hi" })) + ev({ error: { message: "maximum context length exceeded", type: "invalid_request_error", code: 400 } }));
      case "cut-mid-char":
        // The connection ends inside an event, inside a character ("café": its "é" is two bytes, one sent).
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write(ev(d({ role: "assistant", content: "Un " })));
        return void res.end(Buffer.concat([Buffer.from('data: {"choices":[{"index":0,"delta":{"content":"caf'), Buffer.from([0xc3])]));
      case "reset-after-finish":
        // The message and its finish reason arrive; the connection is reset before the usage chunk and [DONE].
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write(ev(d({ role: "assistant", content: "All " })) + ev(d({ content: "there." })) + ev(d({}, "stop")));
        return void setTimeout(() => res.socket?.destroy(), 50);
      case "not-utf8":
        res.writeHead(200, { "content-type": "text/event-stream" });
        return void res.end(Buffer.concat([Buffer.from(ev(d({ role: "assistant", content: "Un " }))), Buffer.from('data: {"choices":[{"index":0,"delta":{"content":"caf'), Buffer.from([0xff]), Buffer.from('"}}]}\n\n')]));
      case "long-event":
        res.writeHead(200, { "content-type": "text/event-stream" });
        return void res.end(ev(d({ role: "assistant", content: "Un " })) + ev(d({ content: "x".repeat(LINE_LIMIT + 1) })) + ev(d({}, "stop")) + ev("[DONE]"));
      case "event-at-limit": {
        // An event whose data is exactly the line limit: the limit is the event's, not counting `data: ` before it.
        const bare = JSON.stringify(d({ content: "" }));
        res.writeHead(200, { "content-type": "text/event-stream" });
        return void res.end(ev(d({ role: "assistant", content: "Un " })) + ev(d({ content: "z".repeat(LINE_LIMIT - bare.length) })) + ev(d({}, "stop")) + ev("[DONE]"));
      }
      case "long-stream": {
        // Each event within the line limit; together more than the host reads of one answer.
        res.writeHead(200, { "content-type": "text/event-stream" });
        const piece = ev(d({ content: "y".repeat(LINE_LIMIT / 2) }));
        return void res.end(ev(d({ role: "assistant", content: "Un " })) + piece.repeat(Math.ceil(ANSWER_CAP / piece.length) + 1) + ev(d({}, "stop")) + ev("[DONE]"));
      }
      case "badreq":
        return sendJson(res, 400, { error: { message: "maximum context length exceeded", type: "invalid_request_error" } });
      default:
        return sendJson(res, 200, { choices: [{ message: { role: "assistant", content: "ok" }, finish_reason: "stop" }] });
    }
  });
  runner = await startScriptedRunner({ name: "z1", runners: [{ name: "default", label: { en_US: "z1" }, permissions: { models: ["invoke", "stream"] } }] });
  host = await startTestHost({ vars: { RUNNER_MAX_LINE_BYTES: String(LINE_LIMIT), RESOURCE_RESPONSE_MAX_BYTES: String(ANSWER_CAP) } });
  const register = async (path: string, payload: unknown) => {
    const res = await host.admin("POST", path, payload);
    if (res.status !== 201) throw new Error(`POST ${path}: ${res.status} ${JSON.stringify(res.body)}`);
  };
  const models = ["emptydata", "badreq-chunk", "badreq", "cut-mid-char", "reset-after-finish", "not-utf8", "long-event", "long-stream", "event-at-limit"];
  for (const m of models) await register("/v1/admin/models", { model_id: m, name: m, kind: "llm", base_url: `${provider.url}/v1`, api_key: KEY, model: m });
  await register("/v1/admin/runner-services", { base_url: runner.url });
  await register("/v1/admin/agents", { agent_id: "z1", name: "z1", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "global" }, resource_policy: { models } });
});

afterAll(async () => {
  await host?.dispose();
  await Promise.all([runner?.close(), provider?.close()]);
});

const ndjson = async (res: Response) => (await res.text()).split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
const user = (content: string) => [{ role: "user", content }];

describe("model.stream from a provider's SSE", () => {
  it("reads an event with empty data as a keep-alive (WHATWG SSE does not dispatch it), not a chunk that fails the stream", async () => {
    const { result, runId } = await runner.run<any>(host, "emptydata", async (_api, _ctx, _emit, raw) => ndjson(await raw("model.stream", { model_id: "emptydata", messages: user("hi") })));
    expect(result.at(-1)).toMatchObject({ type: "completed", message: { content: "Hello" } });
    expect((await runLedger(host, runId)).some((e) => e.type === "model.usage")).toBe(true);
  });

  it("marks a provider's 4xx-class error mid-stream not retryable, as model.invoke does for the same error", async () => {
    const { result } = await runner.run<any>(host, "badreq", async (api, _ctx, _emit, raw) => ({
      invoke: (await api("model.invoke", { model_id: "badreq", messages: user("hi") })).body,
      stream: await ndjson(await raw("model.stream", { model_id: "badreq-chunk", messages: user("hi") })),
    }));
    expect(result.invoke.error.retryable).toBe(false);
    expect(result.stream.at(-1)).toMatchObject({ type: "error", error: { code: "provider_error", retryable: false } });
  });

  it("ends a stream cut inside an event, mid-character, with stream_closed: the unfinished event is dropped, as SSE drops it", async () => {
    const { result, runId } = await runner.run<any>(host, "cut-mid-char", async (_api, _ctx, _emit, raw) => ndjson(await raw("model.stream", { model_id: "cut-mid-char", messages: user("hi") })));
    expect(result.slice(0, -1).map((l: any) => l.chunk.content)).toEqual(["Un "]);
    expect(result.at(-1)).toMatchObject({ type: "error", error: { code: "stream_closed", retryable: true } });
    expect((await runLedger(host, runId)).find((e) => e.type === "model.failed")?.data).toMatchObject({ code: "stream_closed" });
  });

  it("completes a stream whose connection breaks after the finish reason: the message is whole, only its usage is missing", async () => {
    const { result, runId } = await runner.run<any>(host, "reset-after-finish", async (_api, _ctx, _emit, raw) => ndjson(await raw("model.stream", { model_id: "reset-after-finish", messages: user("hi") })));
    expect(result.at(-1)).toMatchObject({ type: "completed", finish_reason: "stop", message: { content: "All there." }, usage: null });
    const ledger = await runLedger(host, runId);
    expect(ledger.filter((e) => e.type === "model.failed")).toEqual([]);
    expect(ledger.find((e) => e.type === "model.usage")?.data).toMatchObject({ model_id: "reset-after-finish", operation: "stream", total_tokens: null });
  });
});

describe("model.stream from a provider whose stream the host cannot read", () => {
  it("reads an event whose data is exactly the line limit, as a runner's NDJSON line of that size is read", async () => {
    const { result } = await runner.run<any>(host, "at-limit", async (_api, _ctx, _emit, raw) => {
      const lines = await ndjson(await raw("model.stream", { model_id: "event-at-limit", messages: user("hi") }));
      // Its answer is one result line, within the line limit: the message's length, not the message.
      const last = lines.at(-1);
      return { type: last?.type, finish_reason: last?.finish_reason, length: last?.message?.content?.length };
    });
    expect(result).toMatchObject({ type: "completed", finish_reason: "stop" });
    expect(result.length).toBe(3 + LINE_LIMIT - JSON.stringify(d({ content: "" })).length);
  });


  it("names the model provider's stream, not a runner's result line: bytes not UTF-8 (retryable), an event or a stream over the host's limits (not)", async () => {
    // The runner keeps each stream's first and last lines only: its answer is one result line, within the line limit.
    const { result, runId } = await runner.run<any>(host, "unreadable", async (_api, _ctx, _emit, raw) => {
      const call = async (model_id: string) => {
        const lines = await ndjson(await raw("model.stream", { model_id, messages: user("hi") }));
        return { first: lines[0], last: lines.at(-1) };
      };
      return [await call("not-utf8"), await call("long-event"), await call("long-stream")];
    });
    const ends = result.map((r: any) => r.last);
    expect(ends.map((l: any) => [l.type, l.error.code, l.error.retryable])).toEqual([["error", "runtime_error", true], ["error", "runtime_error", false], ["error", "runtime_error", false]]);
    expect(ends[0].error.message).toMatch(/model provider's stream .*not valid UTF-8/);
    expect(ends[1].error.message).toMatch(new RegExp(`model provider's stream .*over ${LINE_LIMIT} bytes`));
    expect(ends[2].error.message).toMatch(new RegExp(`model provider's stream .*${ANSWER_CAP} bytes`));
    for (const l of ends as any[]) expect(l.error.message).not.toMatch(/result (line|stream)|artifact/);
    // What arrived before the fault is still the runner's.
    for (const r of result) expect(r.first).toMatchObject({ type: "delta", chunk: { content: "Un " } });
    const failed = (await runLedger(host, runId)).filter((e) => e.type === "model.failed").map((e) => [e.data.model_id, e.data.code]);
    expect(failed).toEqual([["not-utf8", "runtime_error"], ["long-event", "runtime_error"], ["long-stream", "runtime_error"]]);
  });
});
