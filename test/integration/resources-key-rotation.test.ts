import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeMcpServer } from "../support/fake-mcp";
import { startFakeProvider } from "../support/fake-provider";
import { startFakeRetrieval } from "../support/fake-retrieval";
import { startFakeTools } from "../support/fake-tool";
import { deferred } from "../support/host-api";
import { startTestHost, type TestHost } from "../support/host";
import { startScriptedRunner } from "../support/scripted-runner";

/**
 * README "Host-held models, tools and knowledge bases": `PUT /{id}` replaces a resource's key in place. A leaked key
 * is revoked at the provider and replaced on the host: the next call (of a run under way too, which keeps the
 * resource: it is the one it was granted) carries the new key, and nothing carries the old one again, not even the
 * end of an MCP session opened with it. Keys are never shown, logged, or handed to a runner.
 */
const key = (label: string) => `${label}-${randomBytes(12).toString("hex")}`;
const OLD = { model: key("sk-old"), tool: key("tool-old"), mcp: key("mcp-old"), kb: key("kb-old") };
const NEW = { model: key("sk-new"), tool: key("tool-new"), mcp: key("mcp-new"), kb: key("kb-new") };
const URL_KEY = key("url-key");
const ALL_KEYS = [...Object.values(OLD), ...Object.values(NEW), URL_KEY];

/** What each fake accepts, read at each request: changing it revokes a key. */
const providerKeys: Record<string, string> = { "gpt-rot": OLD.model };
const mcpOpts = { token: OLD.mcp, sessionId: "rotation-session" };
const kbOpts = { apiKey: OLD.kb };
const seenByRunner: string[] = [];

let host: TestHost;
let provider: Awaited<ReturnType<typeof startFakeProvider>>;
let moved: Awaited<ReturnType<typeof startFakeProvider>>;
let tools: Awaited<ReturnType<typeof startFakeTools>>;
let mcp: Awaited<ReturnType<typeof startFakeMcpServer>>;
let kb: Awaited<ReturnType<typeof startFakeRetrieval>>;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;

beforeAll(async () => {
  provider = await startFakeProvider({ keys: providerKeys });
  moved = await startFakeProvider({ keys: providerKeys });
  tools = await startFakeTools({ bigBytes: 10 });
  mcp = await startFakeMcpServer(mcpOpts);
  kb = await startFakeRetrieval(kbOpts);
  runner = await startScriptedRunner({
    name: "key-rotation",
    runners: [{ name: "default", label: { en_US: "r" }, permissions: { models: ["invoke"], tools: ["call"], knowledge_bases: ["retrieve"] } }],
    observe: (text) => seenByRunner.push(text),
  });
  host = await startTestHost({ captureLogs: true });
  const register = async (path: string, body: unknown) => expect((await host.admin("POST", path, body)).status).toBe(201);
  await register("/v1/admin/models", { model_id: "rot", name: "rot", kind: "llm", base_url: provider.baseUrl, api_key: OLD.model, model: "gpt-rot" });
  await register("/v1/admin/tools", { name: "lookup", endpoint: `${tools.url}/weather`, headers: { "x-api-key": OLD.tool }, parameters: { type: "object" } });
  await register("/v1/admin/tools", { name: "keyed", endpoint: `${tools.url}/weather?key=${URL_KEY}&lang=en`, headers: { "x-api-key": OLD.tool }, parameters: { type: "object" } });
  await register("/v1/admin/mcp-servers", { name: "calc", url: mcp.url, headers: { authorization: `Bearer ${OLD.mcp}` } });
  await register("/v1/admin/knowledge-bases", { kb_id: "kb", name: "kb", endpoint: kb.url, api_key: OLD.kb });
  await runner.register(host);
  await register("/v1/admin/agents", {
    agent_id: "rotating", name: "rotating", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "global" },
    resource_policy: { models: ["rot"], tools: ["lookup", "keyed", "calc.add"], knowledge_bases: ["kb"] },
  });
});
afterAll(async () => {
  await host?.dispose();
  await Promise.all([provider?.close(), moved?.close(), tools?.close(), mcp?.close(), kb?.close(), runner?.close()]);
});

/** One call of each granted resource, as a runner makes them: statuses and the answers' gist. */
async function callAll(api: (action: string, params?: Record<string, unknown>) => Promise<{ status: number; body: any }>) {
  const model = await api("model.invoke", { model_id: "rot", messages: [{ role: "user", content: "hi" }] });
  const tool = await api("tool.call", { tool_name: "lookup", parameters: { city: "Oslo" } });
  const mcpTool = await api("tool.call", { tool_name: "calc.add", parameters: { a: 2, b: 3 } });
  const retrieved = await api("knowledge.retrieve", { kb_id: "kb", query: "q", top_k: 1 });
  return {
    model: [model.status, model.body.data?.message?.content],
    tool: [tool.status, tool.body.data?.result?.forecast],
    mcp: [mcpTool.status, mcpTool.body.data?.result?.content?.[0]?.text],
    kb: [retrieved.status, retrieved.body.data?.entries?.length],
  };
}
const ALL_OK = { model: [200, "gpt-rot says: hi"], tool: [200, "sunny"], mcp: [200, "5"], kb: [200, 1] };

/** The credential each upstream received from `from` on (its calls as recorded, in order). */
const sentSince = (marks: Record<string, number>) => ({
  model: provider.calls.slice(marks.model).map((c) => c.authorization),
  tool: tools.calls.slice(marks.tool).map((c) => c.headers["x-api-key"]),
  mcp: mcp.authorizations.slice(marks.mcp).map((c) => c.authorization),
  kb: kb.calls.slice(marks.kb).map((c) => c.authorization),
});
const marks = () => ({ model: provider.calls.length, tool: tools.calls.length, mcp: mcp.authorizations.length, kb: kb.calls.length });

describe("a key rotated by PUT while a run uses the resource", () => {
  it("keeps the resource in the run; its next call carries the new key, and the old one is never sent again", async () => {
    const halfway = deferred();
    const rotated = deferred();
    const run = runner.run(host, "rotation", async (api, ctx) => {
      const before = await callAll(api);
      halfway.resolve();
      await rotated.promise;
      return { before, after: await callAll(api), listed: ctx.resources };
    });
    await halfway.promise;
    const atRotation = marks();
    // The leaked keys are revoked at each upstream, then replaced on the host with what GET shows sent back.
    Object.assign(providerKeys, { "gpt-rot": NEW.model });
    mcpOpts.token = NEW.mcp;
    kbOpts.apiKey = NEW.kb;
    const put = async (path: string, change: Record<string, unknown>) => {
      const shown = await host.admin("GET", path);
      const res = await host.admin("PUT", path, { ...shown.body, ...change });
      expect([res.status, res.body.created_at]).toEqual([200, shown.body.created_at]);
      return res.body;
    };
    const answers = [
      await put("/v1/admin/models/rot", { api_key: NEW.model }),
      await put("/v1/admin/tools/lookup", { headers: { "x-api-key": NEW.tool } }),
      await put("/v1/admin/mcp-servers/calc", { headers: { authorization: `Bearer ${NEW.mcp}` } }),
      await put("/v1/admin/knowledge-bases/kb", { api_key: NEW.kb }),
    ];
    expect(answers.map((a) => a.api_key ?? a.headers)).toEqual(["********", { "x-api-key": "********" }, { authorization: "********" }, "********"]);
    rotated.resolve();
    const { result, runId } = await run;
    expect(result.before).toEqual(ALL_OK);
    expect(result.after).toEqual(ALL_OK);
    expect(result.listed.models.map((m: any) => m.model_id)).toEqual(["rot"]);

    // The run has ended (its MCP session too): from the rotation on, only the new keys went out.
    await expect.poll(() => mcp.calls.filter((c) => c.method === "DELETE").length).toBeGreaterThan(0);
    const sent = sentSince(atRotation);
    expect(sent).toEqual({
      model: [`Bearer ${NEW.model}`],
      tool: [NEW.tool],
      mcp: sent.mcp.map(() => `Bearer ${NEW.mcp}`),
      kb: [`Bearer ${NEW.kb}`],
    });
    expect(sent.mcp.length).toBeGreaterThan(1);

    // Stored sealed; never shown to an operator or a runner, nor written to the ledger or the log.
    const stored = JSON.stringify([
      await host.query("SELECT api_key FROM model"),
      await host.query("SELECT headers_json FROM tool"),
      await host.query("SELECT headers_json FROM mcp_server"),
      await host.query("SELECT api_key FROM knowledge_base"),
    ]);
    expect(stored).toContain("sealed:v3:");
    const ledger = await host.query("SELECT data_json FROM run_event WHERE run_id = ?", [runId]);
    const views = await Promise.all(["models", "tools", "mcp-servers", "knowledge-bases"].map((kind) => host.admin("GET", `/v1/admin/${kind}`)));
    const everything = [stored, JSON.stringify(ledger), JSON.stringify(views.map((v) => v.body)), JSON.stringify(answers), seenByRunner.join("\n"), host.logs()].join("\n");
    for (const k of ALL_KEYS) expect(everything).not.toContain(k);
  });

  it("a kept key follows a new endpoint (sealed again for it), and a view sent back keeps a masked endpoint and headers", async () => {
    const shown = (await host.admin("GET", "/v1/admin/models/rot")).body;
    const before = (await host.query<{ api_key: string }>("SELECT api_key FROM model WHERE model_id = 'rot'"))[0].api_key;
    const put = await host.admin("PUT", "/v1/admin/models/rot", { ...shown, base_url: moved.baseUrl, api_key: undefined });
    expect([put.status, put.body.base_url]).toEqual([200, moved.baseUrl]);
    const after = (await host.query<{ api_key: string }>("SELECT api_key FROM model WHERE model_id = 'rot'"))[0].api_key;
    expect(after).not.toBe(before);

    const keyed = (await host.admin("GET", "/v1/admin/tools/keyed")).body;
    expect(keyed.endpoint).toBe(`${tools.url}/weather?key=********&lang=********`);
    expect((await host.admin("PUT", "/v1/admin/tools/keyed", keyed)).status).toBe(200);

    const at = marks();
    const { result } = await runner.run(host, "moved", async (api) => {
      const model = await api("model.invoke", { model_id: "rot", messages: [{ role: "user", content: "hi" }] });
      const tool = await api("tool.call", { tool_name: "keyed", parameters: {} });
      return [model.status, tool.status];
    });
    expect(result).toEqual([200, 200]);
    expect(moved.calls.map((c) => c.authorization)).toEqual([`Bearer ${NEW.model}`]);
    expect(provider.calls.length).toBe(at.model);
    expect(tools.calls.slice(at.tool).map((c) => [c.path, c.headers["x-api-key"]])).toEqual([[`/weather?key=${URL_KEY}&lang=en`, OLD.tool]]);
  });
});
