import { randomBytes } from "node:crypto";
import { startFakeMcpServer } from "./fake-mcp";
import { startFakeProvider } from "./fake-provider";
import { startFakeRetrieval } from "./fake-retrieval";
import { startFakeTools } from "./fake-tool";
import { startTestHost } from "./host";
import { runLedger, startScriptedRunner } from "./scripted-runner";

/**
 * The world of the resources suites (PROTOCOL §4, §6, §8): a host with
 * host-held models, tools, MCP servers and knowledge bases registered against
 * fakes of the outside world on loopback (an OpenAI-compatible provider, HTTP
 * tools, an MCP server, a retrieval endpoint), agents granting them, and a
 * scripted runner. Each suite starts its own.
 */

const secret = (label: string) => `${label}-${randomBytes(12).toString("hex")}`;
export const INLINE_LIMIT = 2048;
export const TOOL_TIMEOUT_MS = 400;
export const WEATHER_PARAMS = {
  type: "object",
  properties: { city: { type: "string", minLength: 2 }, days: { type: "integer", minimum: 1, maximum: 7 } },
  required: ["city"],
  additionalProperties: false,
};

type Api = (action: string, params?: Record<string, unknown>) => Promise<{ status: number; body: any }>;
export interface RunTools {
  api: Api;
  /** The raw Host API response, for streaming actions. */
  raw: (action: string, params: Record<string, unknown>) => Promise<Response>;
  ctx: any;
}

export type ResourcesFixture = Awaited<ReturnType<typeof startResourcesFixture>>;

export async function startResourcesFixture() {
  const SECRETS = {
    main: secret("sk-main"),
    backup: secret("sk-backup"),
    flaky: secret("sk-flaky"),
    private: secret("sk-private"),
    weather: secret("weather-key"),
    echo: secret("echo-key"),
    mcp: secret("mcp-token"),
    kb: secret("kb-key"),
    // Secrets that JSON escapes, and secrets in endpoint URLs.
    quoted: `quo"te\\${randomBytes(8).toString("hex")}`,
    kbQuoted: `kb"key\\${randomBytes(8).toString("hex")}`,
    urlKey: secret("url-key"),
    mcpPath: secret("mcpPath"),
    mcpQuery: secret("mcp-query"),
  };
  /** Everything the host ever sent a runner: contexts and Host API answers (raw text). */
  const seenByRunners: string[] = [];
  const provider = await startFakeProvider({
    keys: { "gpt-main": SECRETS.main, "rr-1": SECRETS.main, "gpt-backup": SECRETS.backup, "gpt-flaky": SECRETS.flaky, "gpt-private": SECRETS.private },
    failing: ["gpt-flaky"],
  });
  const tools = await startFakeTools({ bigBytes: 4 * INLINE_LIMIT });
  const mcp = await startFakeMcpServer({ token: SECRETS.mcp });
  const retrieval = await startFakeRetrieval({ apiKey: [SECRETS.kb, SECRETS.kbQuoted] });
  const runner = await startScriptedRunner({
    name: "resources",
    runners: [
      {
        name: "default",
        label: { en_US: "resources" },
        capabilities: { streaming: true, tool_calling: true, knowledge_retrieval: true },
        permissions: { models: ["invoke", "stream", "rerank"], tools: ["detail", "call"], knowledge_bases: ["list", "retrieve"], events: ["get", "page"] },
      },
    ],
    observe: (text) => seenByRunners.push(text),
  });

  const host = await startTestHost({ captureLogs: true, vars: { TOOL_RESULT_INLINE_MAX_BYTES: String(INLINE_LIMIT), TOOL_CALL_TIMEOUT_MS: String(TOOL_TIMEOUT_MS) } });
  const register = async (path: string, payload: unknown) => {
    const res = await host.admin("POST", path, payload);
    if (res.status !== 201) throw new Error(`POST ${path}: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  };
  const llm = (model_id: string, model: string, api_key: string) => register("/v1/admin/models", { model_id, name: model_id, kind: "llm", base_url: provider.baseUrl, api_key, model, context_window: 8192 });
  await llm("chat", "gpt-main", SECRETS.main);
  await llm("backup", "gpt-backup", SECRETS.backup);
  await llm("flaky", "gpt-flaky", SECRETS.flaky);
  await llm("private", "gpt-private", SECRETS.private);
  await register("/v1/admin/models", { model_id: "reranker", name: "reranker", kind: "rerank", base_url: provider.baseUrl, api_key: SECRETS.main, model: "rr-1" });
  const tool = (name: string, path: string, extra: Record<string, unknown> = {}) => register("/v1/admin/tools", { name, description: `${name} tool`, endpoint: `${tools.url}${path}`, ...extra });
  await tool("weather", "/weather", { parameters: WEATHER_PARAMS, headers: { "x-api-key": SECRETS.weather } });
  await tool("big", "/big");
  await tool("slow", "/slow");
  await tool("echo_auth", "/echo-auth", { headers: { "x-api-key": SECRETS.echo } });
  await tool("ungranted", "/weather");
  await tool("echo_quote", "/echo-auth", { headers: { "x-api-key": SECRETS.quoted } });
  await tool("echo_url", `/echo-url?key=${SECRETS.urlKey}&lang=en`);
  await register("/v1/admin/mcp-servers", { name: "calc", url: mcp.url, headers: { authorization: `Bearer ${SECRETS.mcp}` } });
  await register("/v1/admin/mcp-servers", { name: "keyed", url: `${mcp.url}/${SECRETS.mcpPath}?access_token=${SECRETS.mcpQuery}`, headers: { authorization: `Bearer ${SECRETS.mcp}` } });
  await register("/v1/admin/knowledge-bases", { kb_id: "docs", name: "Docs", description: "product docs", endpoint: retrieval.url, api_key: SECRETS.kb });
  await register("/v1/admin/knowledge-bases", { kb_id: "private-kb", name: "Private", endpoint: retrieval.url, api_key: SECRETS.kb });
  await register("/v1/admin/knowledge-bases", { kb_id: "quoted-kb", name: "Quoted", endpoint: retrieval.url, api_key: SECRETS.kbQuoted });
  await register("/v1/admin/runner-services", { base_url: runner.url });

  const agent = (agent_id: string, scope: Record<string, unknown>, resource_policy: Record<string, unknown>) =>
    register("/v1/admin/agents", { agent_id, name: agent_id, runner_id: runner.runnerId(), event_types: ["message.received"], scope, resource_policy });
  await agent("full", { type: "global" }, {
    models: ["chat", "flaky", "reranker"],
    fallback_models: ["backup"],
    tools: ["weather", "big", "slow", "echo_auth", "calc.add", "calc.shout"],
    knowledge_bases: ["docs"],
  });
  // Narrowed by `allow` and with no fallback: what the manifest asks for is an upper bound only.
  await agent("narrow", { type: "conversation", id: "narrow" }, {
    allow: { models: ["invoke"], tools: ["detail"] },
    models: ["flaky", "chat"],
    tools: ["weather"],
  });
  // Upstreams that echo what they were sent.
  await agent("careless", { type: "conversation", id: "careless" }, { tools: ["echo_quote", "echo_url", "keyed.shout"], knowledge_bases: ["quoted-kb"] });

  /** NDJSON lines of a streaming answer, as they arrive (each also counts as seen by the runner). */
  async function* ndjson(res: Response): AsyncGenerator<any> {
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let nl: number;
      while ((nl = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        seenByRunners.push(line);
        if (line.trim()) yield JSON.parse(line);
      }
    }
  }

  return {
    host,
    provider,
    tools,
    mcp,
    retrieval,
    runner,
    SECRETS,
    seenByRunners,
    ndjson,
    /** Run `script` inside a run of `conversationId` and return what it returned. */
    inRun: <T = any>(conversationId: string, script: (t: RunTools) => Promise<unknown>) => runner.run<T>(host, conversationId, (api, ctx, _emit, raw) => script({ api, raw, ctx })),
    ledger: (runId: string) => runLedger(host, runId),
    async close() {
      await host.dispose();
      await Promise.all([runner.close(), provider.close(), tools.close(), mcp.close(), retrieval.close()]);
    },
  };
}
