import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listenLoopback, readBody, sendJson } from "../support/http-server";
import { startTestHost, type TestHost } from "../support/host";
import { runLedger, startScriptedRunner } from "../support/scripted-runner";
import { sseBody } from "../support/model-agent";

/**
 * MODEL_ATTEMPT_TIMEOUT_MS and fallback for model.stream, against a
 * provider that accepts a stream and keeps it alive with SSE comments (as
 * gateways do while a request is queued) without ever sending a data event;
 * and a first event reporting a provider fault that arrives in pieces.
 */

const KEY = "sk-preamble-fallback-0123456789abcdef";
const ATTEMPT_TIMEOUT_MS = 700;
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
let provider: Awaited<ReturnType<typeof listenLoopback>>;

beforeAll(async () => {
  provider = await listenLoopback(async (req, res) => {
    const body = JSON.parse((await readBody(req)) || "{}");
    if (req.headers.authorization !== `Bearer ${KEY}`) return sendJson(res, 401, { error: "bad key" });
    res.writeHead(200, { "content-type": "text/event-stream" });
    if (body.model === "queued") {
      // Accepted, then only comments: the request never gets to a model.
      res.write(": PROCESSING\n\n");
      const ticker = setInterval(() => res.write(": PROCESSING\n\n"), 100);
      const limit = setTimeout(() => res.end(), 20_000);
      res.on("close", () => {
        clearInterval(ticker);
        clearTimeout(limit);
      });
      return;
    }
    const fault = `{"error":\r\n{"code":503,"message":"overloaded"}}`;
    if (body.model === "crlf") {
      // One event in two data lines with CRLF line ends, its second line later: the first CRLF ends a line, not the event.
      res.write(`data: {"error":\r\n`);
      setTimeout(() => res.end(`data: {"code":503,"message":"overloaded"}}\r\n\r\n${sseBody(["[DONE]"])}`), 150);
      return;
    }
    if (body.model === "dribble") {
      // The same event a byte at a time, its blank line split across writes.
      const bytes = [...`: keep-alive\n\ndata: ${fault.replace("\r\n", "")}\n\n`];
      const next = () => (bytes.length ? res.write(bytes.shift()!, () => setTimeout(next, 2)) : res.end(sseBody(["[DONE]"])));
      next();
      return;
    }
    res.end(sseBody([{ choices: [{ index: 0, delta: { role: "assistant", content: `from ${body.model}` }, finish_reason: "stop" }] }, "[DONE]"]));
  });
  runner = await startScriptedRunner({
    name: "preamble-fallback",
    runners: [{ name: "default", label: { en_US: "preamble-fallback" }, permissions: { models: ["invoke", "stream"] } }],
  });
  host = await startTestHost({ vars: { MODEL_ATTEMPT_TIMEOUT_MS: String(ATTEMPT_TIMEOUT_MS), RUN_DEADLINE_MS: "8000" } });
  const register = async (path: string, payload: unknown) => {
    const res = await host.admin("POST", path, payload);
    if (res.status !== 201) throw new Error(`POST ${path}: ${res.status} ${JSON.stringify(res.body)}`);
  };
  for (const m of ["queued", "good", "crlf", "dribble"]) {
    await register("/v1/admin/models", { model_id: m, name: m, kind: "llm", base_url: `${provider.url}/v1`, api_key: KEY, model: m });
  }
  await register("/v1/admin/runner-services", { base_url: runner.url });
  await register("/v1/admin/agents", {
    agent_id: "fb", name: "fb", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "global" },
    resource_policy: { models: ["queued", "crlf", "dribble"], fallback_models: ["good"] },
  });
});

afterAll(async () => {
  await host?.dispose();
  await Promise.all([runner?.close(), provider?.close()]);
});

const ndjson = async (res: Response) => (await res.text()).split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));

describe("model.stream attempt timeout", () => {
  it("a provider that sends only SSE comments never answered: it falls back within MODEL_ATTEMPT_TIMEOUT_MS", async () => {
    const { result, runId } = await runner.run(host, "queued", async (_api, _ctx, _emit, raw) => {
      const started = Date.now();
      const answer = ndjson(await raw("model.stream", { model_id: "queued", messages: [{ role: "user", content: "hi" }] }));
      // Waited for well past the attempt timeout (the run's deadline is 8 s).
      const lines = await Promise.race([answer, new Promise((r) => setTimeout(r, ATTEMPT_TIMEOUT_MS + 3_000, "still waiting for a line"))]);
      return { lines, ms: Date.now() - started };
    });
    expect(result.lines).toBeInstanceOf(Array);
    expect(result.lines.at(-1)).toMatchObject({ type: "completed", model_id: "good", message: { content: "from good" } });
    expect(result.ms).toBeLessThan(ATTEMPT_TIMEOUT_MS + 2_000);
    expect((await runLedger(host, runId)).filter((e) => e.type === "model.fallback")).toHaveLength(1);
  });
});

describe("model.stream first event in pieces", () => {
  it.each(["crlf", "dribble"])("a provider fault in a first event that arrives in pieces (%s) is seen whole: it falls back", async (model) => {
    const { result, runId } = await runner.run(host, model, async (_api, _ctx, _emit, raw) =>
      ndjson(await raw("model.stream", { model_id: model, messages: [{ role: "user", content: "hi" }] })),
    );
    expect(result.at(-1)).toMatchObject({ type: "completed", model_id: "good", message: { content: "from good" } });
    const fallbacks = (await runLedger(host, runId)).filter((e) => e.type === "model.fallback");
    expect(fallbacks).toHaveLength(1);
  });
});
