import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listenLoopback, readBody, sendJson } from "../support/http-server";
import { startTestHost, type TestHost } from "../support/host";
import { startScriptedRunner } from "../support/scripted-runner";
import { bindModelAgent, sseBody } from "../support/model-agent";

/**
 * In a streamed answer, text that may be the start of a key waits for the next delta in every text field of a
 * delta, not only `content`: `reasoning_content` (DeepSeek, vLLM, many OpenAI-compatible gateways) and `refusal`
 * too, so a key echoed there across several deltas never reaches the runner whole.
 */
const KEY = "sk-reason-0123456789abcdefABCDEF";
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
let provider: Awaited<ReturnType<typeof listenLoopback>>;

beforeAll(async () => {
  provider = await listenLoopback(async (req, res) => {
    const body = JSON.parse((await readBody(req)) || "{}");
    if (req.headers.authorization !== `Bearer ${KEY}`) return sendJson(res, 401, { error: "bad key" });
    const field = body.model === "refusal" ? "refusal" : "reasoning_content";
    // A careless proxy thinking aloud about the key it received, a few characters per delta.
    const parts = `the caller used ${req.headers.authorization}`.match(/.{1,6}/g)!;
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.end(sseBody([
      ...parts.map((p) => ({ choices: [{ index: 0, delta: { [field]: p }, finish_reason: null }] })),
      { choices: [{ index: 0, delta: { content: "done" }, finish_reason: "stop" }] },
      "[DONE]",
    ]));
  });
  runner = await startScriptedRunner({ name: "reason", runners: [{ name: "default", label: { en_US: "reason" }, permissions: { models: ["invoke", "stream"] } }] });
  host = await startTestHost();
  await bindModelAgent(host, runner, { agentId: "reason", baseUrl: `${provider.url}/v1`, models: { reasoner: KEY, refusal: KEY } });
});

afterAll(async () => {
  await host?.dispose();
  await Promise.all([runner?.close(), provider?.close()]);
});

describe("model.stream: secrets split across non-content delta fields", () => {
  for (const [model, field] of [["reasoner", "reasoning_content"], ["refusal", "refusal"]] as const) {
    it(`a key the provider streams back across ${field} deltas never reaches the runner`, async () => {
      const { result } = await runner.run(host, `reason-${model}`, async (_api, _ctx, _emit, raw) => {
        const res = await raw("model.stream", { model_id: model, messages: [{ role: "user", content: "think" }] });
        return (await res.text()).split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
      });
      expect(result.at(-1)).toMatchObject({ type: "completed" });
      // What the runner can reassemble from the deltas it was sent.
      const joined = result.filter((l: any) => l.type === "delta").map((l: any) => l.chunk[field] ?? "").join("");
      expect(joined).not.toContain(KEY);
      expect(joined).toBe("the caller used Bearer [redacted]");
    });
  }
});
