import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listenLoopback, readBody } from "../support/http-server";
import { startTestHost, type TestHost } from "../support/host";
import { startScriptedRunner } from "../support/scripted-runner";

/**
 * A model stream keeps the message it assembles from its deltas until its `completed` line: up to
 * RESOURCE_RESPONSE_MAX_BYTES of text per stream. Those are held against RESOURCE_RESPONSE_BUDGET_BYTES as an
 * invoke's answer is, so many streams of hostile providers at once cannot take the isolate past it: the stream
 * that would ends with a retryable `rate_limited` error line, the others go on, and its share is given back.
 */

const MAX_BYTES = 64 * 1024;
const DELTAS = 40;
const DELTA_CHARS = 1000;

let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
let provider: Awaited<ReturnType<typeof listenLoopback>>;
let releaseHeld!: () => void;
const held = new Promise<void>((r) => (releaseHeld = r));

const sse = (chunk: unknown) => `data: ${JSON.stringify(chunk)}\n\n`;

beforeAll(async () => {
  provider = await listenLoopback(async (req, res) => {
    const body = JSON.parse(await readBody(req));
    res.writeHead(200, { "content-type": "text/event-stream" });
    for (let i = 0; i < DELTAS; i++) res.write(sse({ choices: [{ index: 0, delta: { content: "a".repeat(DELTA_CHARS) } }] }));
    // "held" sends its deltas, then waits (holding its message in the host) until the test lets it finish.
    if (body.model === "held") await held;
    res.end(sse({ choices: [{ index: 0, delta: {}, finish_reason: "stop" }] }) + "data: [DONE]\n\n");
  });
  runner = await startScriptedRunner({ name: "stream-budget", runners: [{ name: "default", label: { en_US: "b" }, permissions: { models: ["invoke", "stream"] } }] });
  host = await startTestHost({ vars: { RESOURCE_RESPONSE_MAX_BYTES: String(MAX_BYTES), RESOURCE_RESPONSE_BUDGET_BYTES: String(MAX_BYTES) } });
  for (const model of ["held", "flowing"]) {
    const r = await host.admin("POST", "/v1/admin/models", { model_id: model, name: model, kind: "llm", base_url: provider.url, api_key: "sk-stream-budget-1", model });
    if (r.status !== 201) throw new Error(JSON.stringify(r.body));
  }
  await runner.register(host);
  const agent = await host.admin("POST", "/v1/admin/agents", {
    agent_id: "b", name: "b", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "global" }, resource_policy: { models: ["held", "flowing"] },
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

describe("model streams held at once", () => {
  it("past the answer budget end with a retryable rate_limited line; the others complete, and the budget is given back", async () => {
    const { result } = await runner.run(host, "stream-budget", async (_api, _ctx, _emit, raw) => {
      const first = (await raw("model.stream", { model_id: "held", messages })).body!.getReader();
      const decoder = new TextDecoder();
      let firstText = "";
      while (parse(firstText.slice(0, firstText.lastIndexOf("\n") + 1)).length < DELTAS) {
        const { value, done } = await first.read();
        if (done) break;
        firstText += decoder.decode(value, { stream: true });
      }
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
