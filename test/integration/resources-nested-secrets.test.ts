import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listenLoopback, readBody, sendJson } from "../support/http-server";
import { startTestHost, type TestHost } from "../support/host";
import { startScriptedRunner } from "../support/scripted-runner";
import { bindModelAgent, sseBody } from "../support/model-agent";

/**
 * A model's key may hold secrets of its own: a gateway's key pasted with the credential after it ("<key id> <secret>
 * <suffix>") is scrubbed whole and each part of it too (secretFragments). What a provider echoes is scrubbed in the text
 * as it sent it: a part found inside the key neither lets out the head of the key held back across deltas nor takes
 * apart the `[redacted]` the whole key became.
 */
/** Its part "sk-inner-0123456" is a secret of its own; "Zq9", too short to be one, is only ever shown inside the key. */
const STREAMED_KEY = "gw-key-0123456789 sk-inner-0123456 Zq9";
/** Its parts "redacted" and "dacted" are in the marker the whole key becomes. */
const MARKER_KEY = "gw-key-9876543210 redacted dacted";

let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
let provider: Awaited<ReturnType<typeof listenLoopback>>;

beforeAll(async () => {
  provider = await listenLoopback(async (req, res) => {
    const body = JSON.parse((await readBody(req)) || "{}");
    const authorization = req.headers.authorization ?? "";
    // A careless proxy's refusal, quoting the header it was sent.
    if (!body.stream) return sendJson(res, 401, { error: { message: `Incorrect API key provided: ${authorization}` } });
    // ... and its answer thinking aloud about it, a few characters per delta: the inner secret is whole in the fourth
    // delta from the end, the key's last characters come after it.
    const parts = `the caller used ${authorization}`.match(/.{1,5}/g)!;
    res.writeHead(200, { "content-type": "text/event-stream" });
    res.end(sseBody([...parts.map((p) => ({ choices: [{ index: 0, delta: { content: p }, finish_reason: null }] })), { choices: [{ index: 0, delta: {}, finish_reason: "stop" }] }, "[DONE]"]));
  });
  runner = await startScriptedRunner({ name: "nested", runners: [{ name: "default", label: { en_US: "nested" }, permissions: { models: ["invoke", "stream"] } }] });
  host = await startTestHost();
  await bindModelAgent(host, runner, { agentId: "nested", baseUrl: `${provider.url}/v1`, models: { streamed: STREAMED_KEY, marker: MARKER_KEY } });
});

afterAll(async () => {
  await host?.dispose();
  await Promise.all([runner?.close(), provider?.close()]);
});

const user = [{ role: "user", content: "which key?" }];

describe("a model's key holding secrets of its own", () => {
  it("streamed back across deltas, reaches the runner as one [redacted], none of it before or after", async () => {
    const { result } = await runner.run(host, "nested-stream", async (_api, _ctx, _emit, raw) => {
      const res = await raw("model.stream", { model_id: "streamed", messages: user });
      return (await res.text()).split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
    });
    expect(result.at(-1)).toMatchObject({ type: "completed" });
    const streamed = result.filter((l: any) => l.type === "delta").map((l: any) => l.chunk.content ?? "").join("");
    expect(streamed).toBe("the caller used Bearer [redacted]");
    expect(result.at(-1).message.content).toBe("the caller used Bearer [redacted]");
  });

  it("streamed back, reaches the runner as one [redacted] the parts inside it do not take apart (scrubbed once)", async () => {
    const { result } = await runner.run(host, "nested-marker-stream", async (_api, _ctx, _emit, raw) => {
      const res = await raw("model.stream", { model_id: "marker", messages: user });
      return (await res.text()).split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
    });
    const streamed = result.filter((l: any) => l.type === "delta").map((l: any) => l.chunk.content ?? "").join("");
    expect(streamed).toBe("the caller used Bearer [redacted]");
    expect(result.at(-1)).toMatchObject({ type: "completed", message: { content: "the caller used Bearer [redacted]" } });
  });

  it("quoted in a provider's refusal, leaves one [redacted] the parts inside it do not take apart", async () => {
    const { result } = await runner.run(host, "nested-error", async (api) => api("model.invoke", { model_id: "marker", messages: user }));
    expect(result.status).toBe(502);
    expect(result.body.error.message).toBe('the model provider answered HTTP 401: {"error":{"message":"Incorrect API key provided: Bearer [redacted]"}}');
  });
});
