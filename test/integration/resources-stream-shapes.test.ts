import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listenLoopback, readBody, sendJson } from "../support/http-server";
import { startTestHost, type TestHost } from "../support/host";
import { runLedger, startScriptedRunner } from "../support/scripted-runner";
import { sseBody } from "../support/model-agent";

/**
 * model.stream against providers that answer in less common but legitimate shapes (several choices, refusals,
 * reasoning, a reset connection, an error quoting the key), and a stream left open when the run ends.
 */

const KEY = "sk-stream-shapes-0123456789abcdefABCDEF";
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
let provider: Awaited<ReturnType<typeof listenLoopback>>;
let endlessClosed = 0;

const choice = (index: number, delta: Record<string, unknown>, finish: string | null = null) => ({ index, delta, finish_reason: finish });

beforeAll(async () => {
  provider = await listenLoopback(async (req, res) => {
    const body = JSON.parse((await readBody(req)) || "{}");
    if (req.headers.authorization !== `Bearer ${KEY}`) return sendJson(res, 401, { error: "bad key" });
    switch (body.model) {
      case "multi": {
        // n = 2: OpenAI streams both choices, each chunk naming its choice's index.
        if (!body.stream) {
          return sendJson(res, 200, {
            choices: [
              { index: 0, message: { role: "assistant", content: "Alpha one" }, finish_reason: "stop" },
              { index: 1, message: { role: "assistant", content: "Beta two" }, finish_reason: "stop" },
            ],
          });
        }
        res.writeHead(200, { "content-type": "text/event-stream" });
        return void res.end(
          sseBody([
            { choices: [choice(0, { role: "assistant", content: "" })] },
            { choices: [choice(1, { role: "assistant", content: "" })] },
            { choices: [choice(0, { content: "Alpha" })] },
            { choices: [choice(1, { content: "Beta" })] },
            { choices: [choice(0, { content: " one" })] },
            { choices: [choice(1, { content: " two" })] },
            { choices: [choice(0, {}, "stop")] },
            { choices: [choice(1, {}, "stop")] },
            "[DONE]",
          ]),
        );
      }
      case "refuse": {
        // OpenAI's structured-output refusals: the message carries `refusal`, content stays null.
        if (!body.stream) {
          return sendJson(res, 200, { choices: [{ index: 0, message: { role: "assistant", content: null, refusal: "I can't help with that." }, finish_reason: "stop" }] });
        }
        res.writeHead(200, { "content-type": "text/event-stream" });
        return void res.end(
          sseBody([
            { choices: [choice(0, { role: "assistant", content: null, refusal: "" })] },
            { choices: [choice(0, { refusal: "I can't" })] },
            { choices: [choice(0, { refusal: " help with that." })] },
            { choices: [choice(0, {}, "stop")] },
            "[DONE]",
          ]),
        );
      }
      case "reasoner": {
        // DeepSeek-style reasoning_content, then content.
        if (!body.stream) {
          return sendJson(res, 200, { choices: [{ index: 0, message: { role: "assistant", content: "42", reasoning_content: "Think hard." }, finish_reason: "stop" }] });
        }
        res.writeHead(200, { "content-type": "text/event-stream" });
        return void res.end(
          sseBody([
            { choices: [choice(0, { role: "assistant", reasoning_content: "Think" })] },
            { choices: [choice(0, { reasoning_content: " hard." })] },
            { choices: [choice(0, { content: "42" })] },
            { choices: [choice(0, {}, "stop")] },
            "[DONE]",
          ]),
        );
      }
      case "echo-error": {
        // A careless provider whose error chunk quotes the request it refused, and the credential it came with.
        res.writeHead(200, { "content-type": "text/event-stream" });
        const text = body.messages.at(-1).content;
        return void res.end(
          sseBody([
            { choices: [choice(0, { role: "assistant", content: "Hi" })] },
            { error: { message: `request failed for prompt "${text}" authorised by ${req.headers.authorization}` } },
          ]),
        );
      }
      case "reset": {
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write(sseBody([{ choices: [choice(0, { role: "assistant", content: "Hel" })] }, { choices: [choice(0, { content: "lo" })] }]));
        setTimeout(() => res.socket?.destroy(), 50);
        return;
      }
      case "endless": {
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write(sseBody([{ choices: [choice(0, { role: "assistant", content: "tick" })] }]));
        const ticker = setInterval(() => res.write(sseBody([{ choices: [choice(0, { content: "." })] }])), 20);
        const limit = setTimeout(() => res.end(), 20_000);
        res.on("close", () => {
          clearInterval(ticker);
          clearTimeout(limit);
          if (!res.writableFinished) endlessClosed++;
        });
        return;
      }
      default:
        return sendJson(res, 200, { choices: [{ message: { role: "assistant", content: "ok" }, finish_reason: "stop" }] });
    }
  });
  runner = await startScriptedRunner({
    name: "stream-shapes",
    runners: [{ name: "default", label: { en_US: "stream-shapes" }, permissions: { models: ["invoke", "stream"] } }],
  });
  host = await startTestHost({});
  const register = async (path: string, payload: unknown) => {
    const res = await host.admin("POST", path, payload);
    if (res.status !== 201) throw new Error(`POST ${path}: ${res.status} ${JSON.stringify(res.body)}`);
  };
  for (const m of ["multi", "refuse", "reasoner", "echo-error", "endless", "reset"]) {
    await register("/v1/admin/models", { model_id: m, name: m, kind: "llm", base_url: `${provider.url}/v1`, api_key: KEY, model: m });
  }
  await register("/v1/admin/runner-services", { base_url: runner.url });
  await register("/v1/admin/agents", {
    agent_id: "stream-shapes", name: "stream-shapes", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "global" },
    resource_policy: { models: ["multi", "refuse", "reasoner", "echo-error", "endless", "reset"] },
  });
});

afterAll(async () => {
  await host?.dispose();
  await Promise.all([runner?.close(), provider?.close()]);
});

const inRun = <T = any>(conversationId: string, script: Parameters<typeof runner.run>[2]) => runner.run<T>(host, conversationId, script);
const ndjson = async (res: Response) => (await res.text()).split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
const user = (content: string) => [{ role: "user", content }];

describe("model.stream assembles the provider's message as model.invoke answers it", () => {
  it("with n = 2 in extra, the streamed message is the first choice, not both choices interleaved", async () => {
    const { result } = await inRun("multi", async (api, _ctx, _emit, raw) => ({
      invoke: (await api("model.invoke", { model_id: "multi", messages: user("hi"), extra: { n: 2 } })).body,
      stream: await ndjson(await raw("model.stream", { model_id: "multi", messages: user("hi"), extra: { n: 2 } })),
    }));
    expect(result.invoke.data.message.content).toBe("Alpha one");
    const completed = result.stream.at(-1);
    expect(completed.type).toBe("completed");
    expect(completed.message.content).toBe("Alpha one");
  });

  it("a refusal streamed in delta.refusal is in the completed message, as model.invoke gives it", async () => {
    const { result } = await inRun("refuse", async (api, _ctx, _emit, raw) => ({
      invoke: (await api("model.invoke", { model_id: "refuse", messages: user("hi") })).body,
      stream: await ndjson(await raw("model.stream", { model_id: "refuse", messages: user("hi") })),
    }));
    expect(result.invoke.data.message.refusal).toBe("I can't help with that.");
    const completed = result.stream.at(-1);
    expect(completed.type).toBe("completed");
    expect(completed.message.refusal).toBe("I can't help with that.");
  });

  it("reasoning_content streamed in deltas is in the completed message, as model.invoke gives it", async () => {
    const { result } = await inRun("reasoner", async (api, _ctx, _emit, raw) => ({
      invoke: (await api("model.invoke", { model_id: "reasoner", messages: user("hi") })).body,
      stream: await ndjson(await raw("model.stream", { model_id: "reasoner", messages: user("hi") })),
    }));
    expect(result.invoke.data.message.reasoning_content).toBe("Think hard.");
    const completed = result.stream.at(-1);
    expect(completed.type).toBe("completed");
    expect(completed.message.reasoning_content).toBe("Think hard.");
  });
});

describe("model.stream error chunks and secrets", () => {
  it("an error chunk quoting the key where the host cuts the provider's text does not give the runner part of the key", async () => {
    // The runner pads its prompt so that the key straddles the 16 KiB the host keeps of a provider's error text.
    const prefix = 'request failed for prompt "';
    const mid = '" authorised by Bearer ';
    const pad = 16 * 1024 - 20 - prefix.length - mid.length;
    const { result, runId } = await inRun("echo-error", async (_api, _ctx, _emit, raw) => ndjson(await raw("model.stream", { model_id: "echo-error", messages: user("x".repeat(pad)) })));
    const last = result.at(-1);
    expect(last.type).toBe("error");
    const message: string = last.error.message;
    // No 12-character run of the key may appear.
    const pieces = Array.from({ length: KEY.length - 11 }, (_, i) => KEY.slice(i, i + 12));
    expect(pieces.filter((p) => message.includes(p))).toEqual([]);
    const failed = (await runLedger(host, runId)).find((e) => e.type === "model.failed");
    expect(pieces.filter((p) => JSON.stringify(failed).includes(p))).toEqual([]);
  });
});

describe("a provider connection reset mid-stream", () => {
  it("ends the stream with an error line saying the stream closed (stream_closed), recorded as model.failed", async () => {
    const { result, runId } = await inRun("reset", async (_api, _ctx, _emit, raw) => ndjson(await raw("model.stream", { model_id: "reset", messages: user("hi") })));
    expect(result.slice(0, -1).map((l: any) => l.chunk.content).join("")).toBe("Hello");
    expect(result.at(-1)).toMatchObject({ type: "error", error: { code: "stream_closed", retryable: true } });
    expect((await runLedger(host, runId)).find((e) => e.type === "model.failed")?.data).toMatchObject({ code: "stream_closed" });
  });
});

describe("a model stream open when the runner sends its terminal result", () => {
  it("is stopped: the provider's connection is closed soon after the run ends", async () => {
    const before = endlessClosed;
    let hold!: () => void;
    const held = new Promise<void>((r) => (hold = r));
    const { runId } = await inRun("endless", async (_api, _ctx, _emit, raw) => {
      const res = await raw("model.stream", { model_id: "endless", messages: user("go") });
      const reader = res.body!.getReader();
      await reader.read();
      // The runner answers and keeps its end of the stream, unread (a runner that forgot it).
      void held.then(() => reader.cancel().catch(() => {}));
      return "done";
    });
    expect((await host.waitForRun(runId)).status).toBe("completed");
    const deadline = Date.now() + 5_000;
    while (endlessClosed === before && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    const closed = endlessClosed - before;
    hold();
    expect(closed).toBe(1);
  });

  it("is stopped also when the runner never read a byte of it", async () => {
    const before = endlessClosed;
    const { runId } = await inRun("endless-unread", async (_api, _ctx, _emit, raw) => {
      await raw("model.stream", { model_id: "endless", messages: user("go") });
      return "done";
    });
    expect((await host.waitForRun(runId)).status).toBe("completed");
    const deadline = Date.now() + 5_000;
    while (endlessClosed === before && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(endlessClosed - before).toBe(1);
    const entries = await runLedger(host, runId);
    expect(entries.at(-1)?.type).toBe("run.completed");
  });
});
