import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listenLoopback, readBody } from "../support/http-server";
import { startTestHost, type TestHost } from "../support/host";
import { startScriptedRunner, type RawRunApi } from "../support/scripted-runner";

/**
 * A model stream keeps the message it assembles from its deltas until its `completed` line: up to
 * RESOURCE_RESPONSE_MAX_BYTES of text per stream. Those are held against RESOURCE_RESPONSE_BUDGET_BYTES as an
 * invoke's answer is, so many streams of hostile providers at once cannot take the isolate past it: the stream
 * that would ends with a retryable `rate_limited` error line, the others go on, and its share is given back. What is
 * counted is what the stream keeps: a tool call's name a provider repeats whole in every fragment (as MiniMax via
 * NVIDIA NIM does) is kept once, so it is counted once.
 */

const MAX_BYTES = 64 * 1024;
const DELTAS = 40;
const DELTA_CHARS = 1000;
/** The repeating provider's tool name, and how many fragments of its arguments (one character each) it sends. */
const TOOL_NAME = "lookup_" + "n".repeat(113);
const TOOL_FRAGMENTS = 260;

let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
let provider: Awaited<ReturnType<typeof listenLoopback>>;
let releaseHeld!: () => void;
/** What a "held" stream waits for before it ends (each test makes its own). */
let held = new Promise<void>((r) => (releaseHeld = r));

const sse = (chunk: unknown) => `data: ${JSON.stringify(chunk)}\n\n`;

beforeAll(async () => {
  provider = await listenLoopback(async (req, res) => {
    const body = JSON.parse(await readBody(req));
    res.writeHead(200, { "content-type": "text/event-stream" });
    if (body.model === "repeating") {
      // One tool call whose every fragment carries the whole name again beside one character of its arguments.
      for (let i = 0; i < TOOL_FRAGMENTS; i++) {
        const call = { index: 0, ...(i === 0 ? { id: "call_1", type: "function" } : {}), function: { name: TOOL_NAME, arguments: "x" } };
        res.write(sse({ choices: [{ index: 0, delta: { tool_calls: [call] } }] }));
      }
      return void res.end(sse({ choices: [{ index: 0, delta: {}, finish_reason: "tool_calls" }] }) + "data: [DONE]\n\n");
    }
    for (let i = 0; i < DELTAS; i++) res.write(sse({ choices: [{ index: 0, delta: { content: "a".repeat(DELTA_CHARS) } }] }));
    // "held" sends its deltas, then waits (holding its message in the host) until the test lets it finish.
    if (body.model === "held") await held;
    res.end(sse({ choices: [{ index: 0, delta: {}, finish_reason: "stop" }] }) + "data: [DONE]\n\n");
  });
  runner = await startScriptedRunner({ name: "stream-budget", runners: [{ name: "default", label: { en_US: "b" }, permissions: { models: ["invoke", "stream"] } }] });
  host = await startTestHost({ vars: { RESOURCE_RESPONSE_MAX_BYTES: String(MAX_BYTES), RESOURCE_RESPONSE_BUDGET_BYTES: String(MAX_BYTES) } });
  for (const model of ["held", "flowing", "repeating"]) {
    const r = await host.admin("POST", "/v1/admin/models", { model_id: model, name: model, kind: "llm", base_url: provider.url, api_key: "sk-stream-budget-1", model });
    if (r.status !== 201) throw new Error(JSON.stringify(r.body));
  }
  await runner.register(host);
  const agent = await host.admin("POST", "/v1/admin/agents", {
    agent_id: "b", name: "b", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "global" }, resource_policy: { models: ["held", "flowing", "repeating"] },
  });
  if (agent.status !== 201) throw new Error(JSON.stringify(agent.body));
});
afterAll(async () => {
  releaseHeld();
  await host?.dispose();
  await Promise.all([runner?.close(), provider?.close()]);
});

const messages = [{ role: "user", content: "hi" }];
const parse = (text: string) =>
  text
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l));

/** The "held" model's stream, read until it has sent its DELTAS lines (its provider then waits for releaseHeld). */
async function heldStream(raw: RawRunApi) {
  const first = (await raw("model.stream", { model_id: "held", messages })).body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  while (parse(text.slice(0, text.lastIndexOf("\n") + 1)).length < DELTAS) {
    const { value, done } = await first.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  return { first, decoder, text };
}

describe("model streams held at once", () => {
  it("past the answer budget end with a retryable rate_limited line; the others complete, and the budget is given back", async () => {
    const { result } = await runner.run(host, "stream-budget", async (_api, _ctx, _emit, raw) => {
      const { first, decoder, text } = await heldStream(raw);
      let firstText = text;
      // 40,000 characters held by the first; 40,000 more would take the two past the 65,536 budget.
      const second = parse(await (await raw("model.stream", { model_id: "flowing", messages })).text());
      releaseHeld();
      for (;;) {
        const { value, done } = await first.read();
        if (done) break;
        firstText += decoder.decode(value, { stream: true });
      }
      const third = parse(await (await raw("model.stream", { model_id: "flowing", messages })).text());
      return { first: parse(firstText).at(-1), second: second.at(-1), third: third.at(-1) };
    });
    expect(result.second.type).toBe("error");
    expect(result.second.error).toMatchObject({ code: "rate_limited", retryable: true });
    expect(result.first).toMatchObject({ type: "completed", message: { content: "a".repeat(DELTAS * DELTA_CHARS) } });
    expect(result.third).toMatchObject({ type: "completed", message: { content: "a".repeat(DELTAS * DELTA_CHARS) } });
  });
});

describe("a model stream whose provider repeats a tool call's name in every fragment", () => {
  it("counts the name once, as it is kept: beside a stream holding most of the budget, it completes", async () => {
    held = new Promise<void>((r) => (releaseHeld = r));
    const { result } = await runner.run(host, "stream-budget-names", async (_api, _ctx, _emit, raw) => {
      const { first } = await heldStream(raw);
      // 40,000 characters held by the first; the second keeps ~400 (counted for every repeat of the name: ~31,000).
      const second = parse(await (await raw("model.stream", { model_id: "repeating", messages })).text());
      releaseHeld();
      await first.cancel();
      return { second: second.at(-1) };
    });
    expect(result.second).toMatchObject({ type: "completed", message: { tool_calls: [{ id: "call_1", function: { name: TOOL_NAME, arguments: "x".repeat(TOOL_FRAGMENTS) } }] } });
  });
});
