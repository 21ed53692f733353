import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeProvider } from "../support/fake-provider";
import { startTestHost, type TestHost } from "../support/host";
import { BROKEN_CHUNKED_BODY, listenAnsweringRaw, MALFORMED_STATUS_LINE, type LoopbackServer } from "../support/http-server";
import { putAgent, runLedger, startScriptedRunner } from "../support/scripted-runner";

/**
 * Host-held resources whose calls workerd's fetch fails with its opaque "internal error; reference = …" (a host name
 * that does not resolve; an answer that is no readable HTTP): the runner's Host API error, the run's ledger and the
 * operator's 502 name those known causes and the reference, never the bare reference; a model provider failing so is
 * still a provider fault (its fallback is tried); nothing names a credential or a URL's query.
 */
const KEYS = { lost: "sk-opaque-lost-4f1c9a", backup: "sk-opaque-backup-8d2e6b", kb: "kb-opaque-key-1a7c3e", mcp: "mcp-opaque-token-6b9d2f", query: "opaque-query-secret-3c8e1a" };
const NAMED = /the runtime's opaque internal error \(runtime reference [^;\s]+; its known causes: a host name that does not resolve, or an answer that is no readable HTTP, such as a malformed status line or header or headers over 128 KiB in all, or a body whose chunked framing is broken\)/;
const NOWHERE = "http://no-such-host.invalid";
/** An event stream whose `events` come whole (as one chunk), then a chunk whose framing is no HTTP. */
const brokenEventStream = (events: string) =>
  `HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n${events ? `${Buffer.byteLength(events).toString(16)}\r\n${events}\r\n` : ""}zz\r\n`;
const FIRST_EVENT = `data: ${JSON.stringify({ choices: [{ index: 0, delta: { role: "assistant", content: "Hel" } }] })}\n\n`;

let host: TestHost;
let provider: Awaited<ReturnType<typeof startFakeProvider>>;
let garbled: LoopbackServer;
let brokenBody: LoopbackServer;
let brokenStream: LoopbackServer;
let brokenStreamStart: LoopbackServer;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;

async function register(path: string, body: unknown) {
  const res = await host.admin("POST", path, body);
  if (res.status !== 201) throw new Error(`POST ${path}: ${res.status} ${JSON.stringify(res.body)}`);
}

beforeAll(async () => {
  provider = await startFakeProvider({ keys: { "gpt-backup": KEYS.backup } });
  garbled = await listenAnsweringRaw(MALFORMED_STATUS_LINE);
  brokenBody = await listenAnsweringRaw(BROKEN_CHUNKED_BODY);
  brokenStream = await listenAnsweringRaw(brokenEventStream(FIRST_EVENT));
  brokenStreamStart = await listenAnsweringRaw(brokenEventStream(""));
  runner = await startScriptedRunner({
    name: "opaque",
    runners: [{ name: "default", label: { en_US: "opaque" }, capabilities: { tool_calling: true, knowledge_retrieval: true }, permissions: { models: ["invoke", "stream"], tools: ["call"], knowledge_bases: ["retrieve"] } }],
  });
  host = await startTestHost();
  const llm = (model_id: string, base_url: string, api_key: string, model: string) => register("/v1/admin/models", { model_id, name: model_id, kind: "llm", base_url, api_key, model });
  await llm("lost", `${NOWHERE}/v1?key=${KEYS.query}`, KEYS.lost, "gpt-lost");
  await llm("garbled", `${garbled.url}/v1`, KEYS.lost, "gpt-garbled");
  await llm("broken-body", `${brokenBody.url}/v1`, KEYS.lost, "gpt-broken");
  await llm("broken-stream", `${brokenStream.url}/v1`, KEYS.lost, "gpt-broken-stream");
  await llm("broken-stream-start", `${brokenStreamStart.url}/v1`, KEYS.lost, "gpt-broken-stream-start");
  await llm("backup", provider.baseUrl, KEYS.backup, "gpt-backup");
  await register("/v1/admin/tools", { name: "lost_tool", description: "a tool nowhere", endpoint: `${NOWHERE}/tool?key=${KEYS.query}`, headers: { "x-api-key": KEYS.lost } });
  await register("/v1/admin/tools", { name: "garbled_tool", description: "a tool answering garbage", endpoint: `${garbled.url}/tool` });
  await register("/v1/admin/knowledge-bases", { kb_id: "lost-kb", name: "Lost", endpoint: `${NOWHERE}/retrieve`, api_key: KEYS.kb });
  await runner.register(host);
  const agent = (agent_id: string, resource_policy: Record<string, unknown>) => putAgent(host, { agent_id, runner_id: runner.runnerId(), scope: { type: "conversation", id: agent_id }, resource_policy });
  await agent("opaque-fallback", { models: ["lost"], fallback_models: ["backup"] });
  await agent("opaque-alone", { models: ["lost", "garbled", "broken-body", "broken-stream", "broken-stream-start"], tools: ["lost_tool", "garbled_tool"], knowledge_bases: ["lost-kb"] });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await provider?.close();
  await garbled?.close();
  await brokenBody?.close();
  await brokenStream?.close();
  await brokenStreamStart?.close();
});

const invoke = (model_id: string) => ({ model_id, messages: [{ role: "user", content: "hello" }] });

describe("a resource the runtime fails to fetch with its opaque error", () => {
  it("a model provider failing so is a provider fault: its fallback answers, and the ledger says why it was passed over", async () => {
    const { result, runId } = await runner.run(host, "opaque-fallback", (api) => api("model.invoke", invoke("lost")));
    expect(result).toMatchObject({ status: 200, body: { ok: true, data: { model_id: "backup", message: { content: "gpt-backup says: hello" } } } });
    const fallback = (await runLedger(host, runId)).find((e) => e.type === "model.fallback");
    expect(fallback?.data).toMatchObject({ model_id: "lost", next_model_id: "backup", operation: "invoke" });
    expect(fallback?.data.error).toMatch(new RegExp(`^request to ${NOWHERE} failed: ${NAMED.source}$`));
  });

  it("without a fallback, a model, tool or knowledge base call answers an error naming the causes, as the ledger records it", async () => {
    const { result, runId } = await runner.run(host, "opaque-alone", async (api) => ({
      lost: await api("model.invoke", invoke("lost")),
      garbled: await api("model.invoke", invoke("garbled")),
      brokenBody: await api("model.invoke", invoke("broken-body")),
      lostTool: await api("tool.call", { tool_name: "lost_tool", parameters: {} }),
      garbledTool: await api("tool.call", { tool_name: "garbled_tool", parameters: {} }),
      lostKb: await api("knowledge.retrieve", { kb_id: "lost-kb", query: "q" }),
    }));
    const said = Object.fromEntries(Object.entries(result as Record<string, { status: number; body: any }>).map(([k, v]) => [k, [v.status, v.body.error?.message]]));
    expect(said).toEqual({
      lost: [502, expect.stringMatching(new RegExp(`^request to ${NOWHERE} failed: ${NAMED.source}$`))],
      garbled: [502, expect.stringMatching(new RegExp(`^request to ${garbled.url} failed: ${NAMED.source}$`))],
      // The status came; its body's framing is no HTTP.
      brokenBody: [502, expect.stringMatching(new RegExp(`^response broke off: ${NAMED.source}$`))],
      lostTool: [502, expect.stringMatching(NAMED)],
      garbledTool: [502, expect.stringMatching(NAMED)],
      lostKb: [502, expect.stringMatching(NAMED)],
    });
    const ledger = await runLedger(host, runId);
    expect(ledger.filter((e) => e.type === "model.failed").map((e) => e.data.error)).toEqual([said.lost[1], said.garbled[1], said.brokenBody[1]]);
    expect(ledger.filter((e) => e.type === "tool.call.completed").map((e) => e.data.error?.message)).toEqual([said.lostTool[1], said.garbledTool[1]]);
    expect(ledger.find((e) => e.type === "knowledge.failed")?.data.error).toBe(said.lostKb[1]);
    expect(JSON.stringify([result, ledger])).not.toMatch(new RegExp(Object.values(KEYS).join("|")));
  });

  it("a model's stream whose framing breaks, before or after its first event, is said to have broken off for those causes", async () => {
    const { result, runId } = await runner.run(host, "opaque-alone", async (api, _ctx, _emit, raw) => ({
      // Before any event: the host's own 502, as for a provider that did not answer.
      start: await api("model.stream", invoke("broken-stream-start")),
      after: (await (await raw("model.stream", invoke("broken-stream"))).text()).split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l)),
    }));
    const brokeOff = new RegExp(`^the model provider's stream broke off: ${NAMED.source}$`);
    expect([result.start.status, result.start.body.error?.message]).toEqual([502, expect.stringMatching(brokeOff)]);
    expect(result.after.slice(0, -1)).toEqual([{ type: "delta", chunk: { role: "assistant", content: "Hel" } }]);
    expect(result.after.at(-1)).toMatchObject({ type: "error", error: { message: expect.stringMatching(brokeOff) } });
    // A stream that began records its end as its error line said it, under `error` as every model.failed does.
    const failed = (await runLedger(host, runId)).filter((e) => e.type === "model.failed").map((e) => e.data.error);
    expect(failed).toEqual([result.start.body.error.message, result.after.at(-1).error.message]);
  });

  it("an MCP server failing so is a 502 naming the causes, its URL masked, nothing registered", async () => {
    const refused = await host.admin("POST", "/v1/admin/mcp-servers", { name: "nowhere", url: `${NOWHERE}/mcp?access_token=${KEYS.query}`, headers: { authorization: `Bearer ${KEYS.mcp}` } });
    expect([refused.status, refused.body.error.code]).toEqual([502, "bad_gateway"]);
    expect(refused.body.error.message).toMatch(new RegExp(`^could not list the tools of MCP server .*: the MCP server failed: ${NAMED.source}$`));
    expect(JSON.stringify(refused.body)).not.toMatch(new RegExp(`${KEYS.query}|${KEYS.mcp}`));
    expect((await host.admin("GET", "/v1/admin/mcp-servers/nowhere")).status).toBe(404);
  });
});
