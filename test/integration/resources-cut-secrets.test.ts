import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listenLoopback, readBody, sendJson } from "../support/http-server";
import { startTestHost, type TestHost } from "../support/host";
import { runLedger, startScriptedRunner } from "../support/scripted-runner";
import { bindModelAgent } from "../support/model-agent";

/**
 * An upstream's words are cut to size (an error body's first 16 KiB, a bad tool-call index's first 40 characters) before
 * the host knows which secrets to scrub from them: a key the cut runs through is only its start there, which matches no
 * secret whole. Whatever quotes such words (the runner's error, a stream's error line, the ledger, the log, an MCP
 * server's 502) leaves out the last few characters that could start a secret, so no part of one shows.
 */
/** 48 characters: 16 KiB of it repeated ends 16 characters into a copy ("sk-cut-" and 9 more). */
const KEY = "sk-cut-AbCdEf0123456789AbCdEf0123456789AbCdEf012";
const MCP_TOKEN = "mcp-cut-AbCdEf0123456789AbCdEf0123456789AbCdEf01";
/** Longer than the 16 KiB an error keeps, without a single character between copies: one [redacted] when scrubbed whole. */
const repeated = (secret: string) => secret.repeat(400);

let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
let provider: Awaited<ReturnType<typeof listenLoopback>>;
let mcp: Awaited<ReturnType<typeof listenLoopback>>;

const ev = (c: unknown) => `data: ${typeof c === "string" ? c : JSON.stringify(c)}\n\n`;
const d = (delta: Record<string, unknown>, finish: string | null = null) => ({ choices: [{ index: 0, delta, finish_reason: finish }] });
const sse = (res: import("node:http").ServerResponse, body: string) => {
  res.writeHead(200, { "content-type": "text/event-stream" });
  res.end(body);
};

const MODELS = ["http-body", "error-answer", "error-chunk", "start-fault", "not-sse", "tool-index"];

beforeAll(async () => {
  provider = await listenLoopback(async (req, res) => {
    const body = JSON.parse((await readBody(req)) || "{}");
    switch (body.model) {
      case "http-body":
        res.writeHead(400, { "content-type": "text/plain" });
        return void res.end(repeated(KEY));
      case "error-answer":
        return sendJson(res, 200, { error: { message: repeated(KEY), type: "echo" } });
      case "error-chunk":
        return sse(res, ev(d({ role: "assistant", content: "Hi" })) + ev({ error: { message: repeated(KEY) } }));
      case "start-fault":
        return sse(res, ev({ error: { message: repeated(KEY), code: 503 } }));
      case "not-sse":
        res.writeHead(200, { "content-type": "text/plain" });
        return void res.end(repeated(KEY));
      case "tool-index":
        // The key sent where the index of a tool call belongs: quoted by its first 40 characters as JSON.
        return sse(res, ev(d({ role: "assistant", tool_calls: [{ index: KEY, id: "c1", type: "function", function: { name: "f", arguments: "{}" } }] })) + ev(d({}, "tool_calls")) + ev("[DONE]"));
      default:
        return sendJson(res, 500, { error: "unknown model" });
    }
  });
  // An MCP server busy for now, saying when to come back, its refusal the credential it was sent.
  mcp = await listenLoopback(async (req, res) => {
    await readBody(req);
    res.writeHead(503, { "content-type": "text/plain", "retry-after": "1" });
    res.end(repeated(MCP_TOKEN));
  });
  runner = await startScriptedRunner({ name: "cut", runners: [{ name: "default", label: { en_US: "cut" }, permissions: { models: ["invoke", "stream"] } }] });
  host = await startTestHost({ captureLogs: true });
  await bindModelAgent(host, runner, { agentId: "cut", baseUrl: `${provider.url}/v1`, models: Object.fromEntries(MODELS.map((m) => [m, KEY])) });
});

afterAll(async () => {
  await host?.dispose();
  await Promise.all([runner?.close(), provider?.close(), mcp?.close()]);
});

const user = [{ role: "user", content: "hi" }];
const ndjson = async (res: Response) => (await res.text()).split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));

/** Neither the key nor any start of it (its first word and more) is anywhere in `text`. */
const noPartOf = (secret: string, text: string) => expect(text).not.toContain(secret.slice(0, secret.indexOf("-", 3) + 1));

describe("a secret the cut of an upstream's words runs through", () => {
  it("model.invoke: neither an error body nor a provider's error object shows the key's cut start", async () => {
    const { result, runId } = await runner.run<any>(host, "cut-invoke", async (api) => ({
      body: (await api("model.invoke", { model_id: "http-body", messages: user })).body,
      answer: (await api("model.invoke", { model_id: "error-answer", messages: user })).body,
    }));
    expect(result.body.error.message).toBe("the model provider answered HTTP 400: [redacted]…");
    expect(result.answer.error.message).toBe("the model provider answered an error: [redacted]…");
    const failed = (await runLedger(host, runId)).filter((e) => e.type === "model.failed").map((e) => e.data.error);
    expect(failed).toEqual([result.body.error.message, result.answer.error.message]);
    noPartOf(KEY, host.logs());
  });

  it("model.stream: an error before the first token, an answer that is no event stream, an error chunk", async () => {
    const { result, runId } = await runner.run<any>(host, "cut-stream", async (api, _ctx, _emit, raw) => ({
      fault: (await api("model.stream", { model_id: "start-fault", messages: user })).body,
      notSse: (await api("model.stream", { model_id: "not-sse", messages: user })).body,
      chunk: (await ndjson(await raw("model.stream", { model_id: "error-chunk", messages: user }))).at(-1),
    }));
    expect(result.fault.error.message).toBe("the model provider's stream failed before its first token: [redacted]…");
    expect(result.notSse.error.message).toBe("the model provider answered text/plain instead of an event stream: [redacted]…");
    expect(result.chunk).toMatchObject({ type: "error", error: { code: "provider_error", message: "the model provider reported an error mid-stream: [redacted]…" } });
    noPartOf(KEY, JSON.stringify(await runLedger(host, runId)));
    noPartOf(KEY, host.logs());
  });

  it("model.stream: a key sent as a tool call's index is quoted by its first characters, none of them the key's", async () => {
    const { result, runId } = await runner.run<any>(host, "cut-index", async (_api, _ctx, _emit, raw) => ndjson(await raw("model.stream", { model_id: "tool-index", messages: user })));
    expect(result).toEqual([{ type: "error", error: { code: "runtime_error", message: 'the model provider sent a tool call fragment whose index is not 0 to 127: "…', retryable: true, details: { model_id: "tool-index" } } }]);
    noPartOf(KEY, JSON.stringify(await runLedger(host, runId)));
    noPartOf(KEY, host.logs());
  });

  it("an MCP server's refusal at discovery: its 502 shows no start of the credential", async () => {
    const res = await host.admin("POST", "/v1/admin/mcp-servers", { name: "busy", url: `${mcp.url}/mcp`, headers: { authorization: `Bearer ${MCP_TOKEN}` } });
    expect([res.status, res.body.error.code]).toEqual([502, "bad_gateway"]);
    expect(res.body.error.message).toBe(`could not list the tools of MCP server ${mcp.url}/mcp: the MCP server answered HTTP 503: [redacted]…`);
    noPartOf(MCP_TOKEN, JSON.stringify(res.body));
  });
});
