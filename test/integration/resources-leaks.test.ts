import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listenLoopback, readBody, sendJson } from "../support/http-server";
import { startTestHost, type TestHost } from "../support/host";
import { startScriptedRunner } from "../support/scripted-runner";
import { sseBody } from "../support/model-agent";

/**
 * What a host-held resource call must never let out: the operator's
 * credentials (echoed by a provider, quoted in an error, carried along a
 * redirect) and the host's own internals (a failed query). One provider, one
 * tool and "another origin" on loopback.
 */

const KEY = "sk-review-0123456789abcdefABCDEF";
const TOOL_KEY = "tool-review-key-9f8e7d6c5b4a";
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
let provider: Awaited<ReturnType<typeof listenLoopback>>;
let elsewhere: Awaited<ReturnType<typeof listenLoopback>>;
const seenElsewhere: Record<string, string | undefined>[] = [];
/** What a provider's error would make of the operator's log, were its line breaks written as they are. */
const FORGED = "run run_forged: failed (tests.forged); agent forged";

const delta = (content: string, finish: string | null = null) => ({ choices: [{ index: 0, delta: { content }, finish_reason: finish }] });

beforeAll(async () => {
  // Another origin: records what it was sent.
  elsewhere = await listenLoopback(async (req, res) => {
    await readBody(req);
    seenElsewhere.push({ path: req.url, authorization: req.headers.authorization, "x-api-key": req.headers["x-api-key"] as string | undefined });
    sendJson(res, 200, { choices: [{ message: { role: "assistant", content: "from elsewhere" }, finish_reason: "stop" }], redirected: true });
  });
  provider = await listenLoopback(async (req, res) => {
    const body = JSON.parse((await readBody(req)) || "{}");
    if (req.url === "/tool") {
      res.writeHead(307, { location: `${elsewhere.url}/tool-result` });
      return void res.end();
    }
    if (req.headers.authorization !== `Bearer ${KEY}`) return sendJson(res, 401, { error: "bad key" });
    switch (body.model) {
      case "echo-split": {
        // A careless proxy quoting the key it got, as a model streams text: a few characters per delta.
        res.writeHead(200, { "content-type": "text/event-stream" });
        const quoted = `you used ${KEY}`;
        const parts = quoted.match(/.{1,8}/g)!.map((p) => delta(p));
        return void res.end(sseBody([...parts, delta("", "stop"), "[DONE]"]));
      }
      case "echo-tool-split": {
        // The key quoted in the arguments of two tool calls, a few characters per fragment, interleaved.
        res.writeHead(200, { "content-type": "text/event-stream" });
        const args = JSON.stringify({ key: KEY }).match(/.{1,5}/g)!;
        const call = (index: number, part: string, first: boolean) => ({
          choices: [{ index: 0, delta: { tool_calls: [{ index, ...(first ? { id: `call_${index}`, type: "function", function: { name: "lookup", arguments: part } } : { function: { arguments: part } }) }] }, finish_reason: null }],
        });
        const chunks = args.flatMap((part, i) => [call(0, part, i === 0), call(1, part, i === 0)]);
        return void res.end(sseBody([...chunks, { choices: [{ index: 0, delta: {}, finish_reason: "tool_calls" }] }, "[DONE]"]));
      }
      case "long-error":
        // A 503 whose body quotes the key late in a long message.
        return sendJson(res, 503, { error: { message: `${"upstream is overloaded, please retry later. ".repeat(5)}request was authorised by ${req.headers.authorization}` } });
      case "forged-lines":
        // A proxy's page in plain text, quoted as it is.
        res.writeHead(400, { "content-type": "text/plain" });
        return void res.end(`bad request\n${FORGED}`);
      case "forged-stream-lines":
        res.writeHead(200, { "content-type": "text/event-stream" });
        return void res.end(sseBody([delta("so far"), { error: { message: `stream broke\r\n${FORGED}\u2028${FORGED}`, type: "server_error" } }]));
      case "redirect":
        res.writeHead(307, { location: `${elsewhere.url}/v1/chat/completions` });
        return void res.end();
      default:
        return sendJson(res, 200, { choices: [{ message: { role: "assistant", content: "ok" }, finish_reason: "stop" }] });
    }
  });
  runner = await startScriptedRunner({
    name: "leaks",
    runners: [{ name: "default", label: { en_US: "leaks" }, permissions: { models: ["invoke", "stream"], tools: ["detail", "call"], knowledge_bases: ["retrieve"] } }],
  });
  host = await startTestHost({ captureLogs: true, vars: { DB_QUERY_TIMEOUT_MS: "1000" } });
  const register = async (path: string, payload: unknown) => {
    const res = await host.admin("POST", path, payload);
    if (res.status !== 201) throw new Error(`POST ${path}: ${res.status} ${JSON.stringify(res.body)}`);
  };
  for (const m of ["echo-split", "echo-tool-split", "long-error", "redirect", "plain", "forged-lines", "forged-stream-lines"]) {
    await register("/v1/admin/models", { model_id: m, name: m, kind: "llm", base_url: `${provider.url}/v1`, api_key: KEY, model: m });
  }
  await register("/v1/admin/tools", { name: "redirected", description: "a tool behind a redirect", endpoint: `${provider.url}/tool`, headers: { "x-api-key": TOOL_KEY } });
  await register("/v1/admin/runner-services", { base_url: runner.url });
  await register("/v1/admin/agents", {
    agent_id: "leaks", name: "leaks", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "global" },
    resource_policy: { models: ["echo-split", "echo-tool-split", "long-error", "redirect", "plain", "forged-lines", "forged-stream-lines"], tools: ["redirected"] },
  });
});

afterAll(async () => {
  host?.databaseOutage(false);
  await host?.dispose();
  await Promise.all([runner?.close(), provider?.close(), elsewhere?.close()]);
});

const inRun = <T = any>(conversationId: string, script: Parameters<typeof runner.run>[2]) => runner.run<T>(host, conversationId, script);
const ndjson = async (res: Response) => (await res.text()).split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
const user = (content: string) => [{ role: "user", content }];

describe("secrets", () => {
  it("a key the provider streams back across several deltas never reaches the runner", async () => {
    const { result } = await inRun("split", async (_api, _ctx, _emit, raw) => ndjson(await raw("model.stream", { model_id: "echo-split", messages: user("what key?") })));
    expect(result.at(-1)).toMatchObject({ type: "completed" });
    expect(JSON.stringify(result.at(-1))).not.toContain(KEY);
    // The deltas, a few characters each, never spell it out either.
    const streamed = result.filter((l: any) => l.type === "delta").map((l: any) => l.chunk.content).join("");
    expect(streamed).toBe("you used [redacted]");
  });

  it("a key the provider streams back across tool-call argument fragments never reaches the runner", async () => {
    const { result } = await inRun("tool-split", async (_api, _ctx, _emit, raw) => ndjson(await raw("model.stream", { model_id: "echo-tool-split", messages: user("look it up") })));
    expect(result.at(-1)).toMatchObject({ type: "completed", finish_reason: "tool_calls" });
    expect(JSON.stringify(result)).not.toContain(KEY);
    // Joined per call, the fragments the runner saw are the scrubbed arguments, whole.
    const joined = ["", ""];
    for (const line of result.filter((l: any) => l.type === "delta")) for (const c of line.chunk.tool_calls ?? []) joined[c.index] += c.function?.arguments ?? "";
    expect(joined).toEqual([`{"key":"[redacted]"}`, `{"key":"[redacted]"}`]);
    expect(result.at(-1).message.tool_calls.map((c: any) => c.function.arguments)).toEqual(joined);
  });

  it("an upstream error that quotes the key late in its body does not leak part of it", async () => {
    const { result } = await inRun("long-error", async (api) => api("model.invoke", { model_id: "long-error", messages: user("hi") }));
    expect(result.status).toBe(502);
    const message: string = result.body.error.message;
    // No 12-character run of the key may appear.
    const pieces = Array.from({ length: KEY.length - 11 }, (_, i) => KEY.slice(i, i + 12));
    expect(pieces.filter((p) => message.includes(p))).toEqual([]);
  });

  it("a provider's or tool's redirect to another origin does not carry the operator's credentials there", async () => {
    seenElsewhere.length = 0;
    const { result } = await inRun("redirect", async (api) => ({
      model: await api("model.invoke", { model_id: "redirect", messages: user("hi") }),
      tool: await api("tool.call", { tool_name: "redirected", parameters: {} }),
    }));
    // Nothing was sent there: a redirect is the upstream's answer (a failed one), never followed.
    expect(seenElsewhere).toEqual([]);
    expect([result.model.status, result.model.body.error.details.upstream_status]).toEqual([502, 307]);
    expect([result.tool.status, result.tool.body.error.details.upstream_status]).toEqual([502, 307]);
  });
});

describe("host faults during a resource call", () => {
  it("a database failure reading the model is the host's retryable 500, not an upstream 502 quoting the database", async () => {
    const { result } = await inRun("db-model", async (api) => {
      host.databaseOutage({ queries: 1, matching: 'from \\"model\\" where' });
      return api("model.invoke", { model_id: "plain", messages: user("hi") });
    });
    // As for any other Host API call during an outage (database-outage.test.ts): §8's retryable 500, naming no query.
    expect([result.status, result.body.error.code, result.body.error.retryable]).toEqual([500, "runtime_error", true]);
    expect(result.body.error.message).not.toMatch(/select|api_key|from "model"/i);
  });

  it("a host fault during a model call is one line of the log, with its cause, not that line and an upstream failure's", async () => {
    const { runId } = await inRun("db-model-log", async (api) => {
      host.databaseOutage({ queries: 1, matching: 'from \\"model\\" where' });
      await api("model.invoke", { model_id: "plain", messages: user("hi") });
      // Logged after the call above: once its line is in, any line of that call is too.
      return api("model.invoke", { model_id: "long-error", messages: user("hi") });
    });
    await expect.poll(() => host.logs()).toContain(`run ${runId}: model long-error (invoke) failed (runtime_error)`);
    const lines = host.logs().split("\n").filter((l) => l.startsWith(`run ${runId}: model plain (invoke) failed`));
    expect(lines).toEqual([expect.stringMatching(/failed in the host: .*database unavailable \(outage drill\)/)]);
  });

  it("a tool call whose ledger record cannot be written is not reported as the tool's 502 quoting the SQL", async () => {
    const { result } = await inRun("db-tool", async (api) => {
      host.databaseOutage({ queries: 1, matching: '"tool.call.completed"' });
      return api("tool.call", { tool_name: "redirected", parameters: {} });
    });
    expect([result.status, result.body.error?.code, result.body.error?.retryable]).toEqual([500, "runtime_error", true]);
    expect(result.body.error.message).not.toMatch(/insert|run_event/i);
  });

  it("a stream whose end cannot be recorded is logged naming its run and model (the runner has had its end)", async () => {
    const { result, runId } = await inRun("db-stream-end", async (_api, _ctx, _emit, raw) => {
      host.databaseOutage({ queries: 1, matching: '"model.usage"' });
      return ndjson(await raw("model.stream", { model_id: "echo-split", messages: user("hi") }));
    });
    expect(result.at(-1)).toMatchObject({ type: "completed" });
    await expect.poll(() => host.logs()).toContain(`run ${runId}: model echo-split (stream): its end not recorded: `);
  });
});

describe("an upstream's words in the log", () => {
  it("a provider's error, before or mid-stream, that holds line breaks is one line of the log, escaped", async () => {
    const { result, runId } = await inRun("forged-lines", async (api, _ctx, _emit, raw) => ({
      invoke: await api("model.invoke", { model_id: "forged-lines", messages: user("hi") }),
      stream: await ndjson(await raw("model.stream", { model_id: "forged-stream-lines", messages: user("hi") })),
    }));
    expect([result.invoke.status, result.stream.at(-1).type]).toEqual([502, "error"]);
    await expect.poll(() => host.logs()).toContain(`run ${runId}: model forged-stream-lines (stream) ended early`);
    // Each of the provider's words where it was quoted, none on a line of its own (nor after a separator some viewers break at).
    expect(host.logs()).toContain(`run ${runId}: model forged-lines (invoke) failed (runtime_error): the model provider answered HTTP 400: bad request\\n${FORGED}`);
    expect(host.logs()).toMatch(new RegExp(`ended early \\(provider_error\\): .*stream broke\\\\r\\\\n.*\\\\u2028`));
    expect(host.logs().split(/\r\n|\r|\n|\u2028/).filter((l) => l.startsWith("run run_forged"))).toEqual([]);
  });
});
