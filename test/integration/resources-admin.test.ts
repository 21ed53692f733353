import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeMcpServer } from "../support/fake-mcp";
import { startTestHost, type TestHost } from "../support/host";
import { startAdHocRunner } from "../support/runner";

/** The operator's side of host-held resources: register, list (secrets masked), delete. */

const MCP_TOKEN = "mcp-admin-token-5f0c9e2a71";
const API_KEY = "sk-admin-test-9b1e77d3c4";
let host: TestHost;
let mcp: Awaited<ReturnType<typeof startFakeMcpServer>>;
let strict: Awaited<ReturnType<typeof startFakeMcpServer>>;
let shrinking: Awaited<ReturnType<typeof startFakeMcpServer>>;
/** Read on every request: with slowMs the server also lists `slow`. */
const shrinkingOpts: { token: string; slowMs?: number } = { token: MCP_TOKEN, slowMs: 5 };
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;

beforeAll(async () => {
  mcp = await startFakeMcpServer({ token: MCP_TOKEN });
  strict = await startFakeMcpServer({ token: MCP_TOKEN, brokenTool: true });
  shrinking = await startFakeMcpServer(shrinkingOpts);
  runner = await startAdHocRunner({ name: "admin-resources", onRun: (_call, res) => void res.end() });
  host = await startTestHost();
  await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url });
});
afterAll(async () => {
  await host?.dispose();
  await Promise.all([mcp?.close(), strict?.close(), shrinking?.close(), runner?.close()]);
});

describe("models", () => {
  it("registers, lists with the key masked, refuses duplicates and bad input, deletes", async () => {
    const input = { model_id: "m1", name: "Main", kind: "llm", base_url: "https://llm.example/v1", api_key: API_KEY, model: "gpt-x", context_window: 128000 };
    const created = await host.admin("POST", "/v1/admin/models", input);
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ model_id: "m1", name: "Main", kind: "llm", base_url: "https://llm.example/v1", model: "gpt-x", context_window: 128000, api_key: "********" });
    expect((await host.admin("POST", "/v1/admin/models", input)).status).toBe(409);

    const generated = await host.admin("POST", "/v1/admin/models", { name: "Ranker", kind: "rerank", base_url: "http://127.0.0.1:9/v1", api_key: API_KEY, model: "rr" });
    expect(generated.body.model_id).toMatch(/^mdl_/);
    expect((await host.admin("POST", "/v1/admin/models", { ...input, model_id: "m2", kind: "chat" })).status).toBe(400);
    expect((await host.admin("POST", "/v1/admin/models", { ...input, model_id: "m3", base_url: "ftp://x" })).status).toBe(400);
    expect((await host.admin("POST", "/v1/admin/models", { ...input, model_id: "m4", api_key: undefined })).status).toBe(400);

    const list = await host.admin("GET", "/v1/admin/models");
    expect(list.body.items.map((m: any) => m.model_id)).toEqual(["m1", generated.body.model_id]);
    expect(JSON.stringify(list.body)).not.toContain(API_KEY);
    expect((await host.admin("GET", "/v1/admin/models/m1")).body.api_key).toBe("********");

    // Granted (here as a fallback), it stays until no agent names it; saving the agent as GET shows it works throughout.
    const agent = { agent_id: "uses-m1", name: "uses m1", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: "uses-m1" }, resource_policy: { fallback_models: ["m1"] } };
    expect((await host.admin("POST", "/v1/admin/agents", agent)).status).toBe(201);
    const refused = await host.admin("DELETE", "/v1/admin/models/m1");
    expect(refused).toMatchObject({ status: 409, body: { error: { code: "conflict", message: expect.stringMatching(/granted to agent uses-m1/) } } });
    const shown = (await host.admin("GET", "/v1/admin/agents/uses-m1")).body;
    const saved = await host.admin("PUT", "/v1/admin/agents/uses-m1", shown);
    expect(saved.status).toBe(200);
    expect((await host.admin("PUT", "/v1/admin/agents/uses-m1", { ...saved.body, resource_policy: {} })).status).toBe(200);
    expect((await host.admin("DELETE", "/v1/admin/models/m1")).status).toBe(204);
    expect((await host.admin("GET", "/v1/admin/models/m1")).status).toBe(404);
    expect((await host.admin("DELETE", "/v1/admin/models/m1")).status).toBe(404);
  });

  it("requires the admin token", async () => {
    const res = await fetch(`${host.url}/v1/admin/models`);
    expect(res.status).toBe(401);
  });
});

describe("endpoints", () => {
  it("refuse credentials inside the URL (user:password@), which the runtime's fetch would silently not send, without echoing them", async () => {
    const secretUrl = "https://svc:Pa55-endpoint-secret@api.example/v1";
    const writes: [string, Record<string, unknown>][] = [
      ["/v1/admin/models", { model_id: "m-userinfo", name: "m", kind: "llm", base_url: secretUrl, api_key: "sk-userinfo-0123456789", model: "x" }],
      ["/v1/admin/tools", { name: "t_userinfo", endpoint: secretUrl }],
      ["/v1/admin/knowledge-bases", { kb_id: "kb-userinfo", name: "k", endpoint: secretUrl }],
      ["/v1/admin/mcp-servers", { name: "mcp_userinfo", url: secretUrl }],
      ["/v1/admin/bots", { platform: "telegram", api_base_url: secretUrl, credentials: { bot_token: "123:userinfo-bot-token", secret_token: "userinfo-secret-token-0123" } }],
    ];
    for (const [path, body] of writes) {
      const res = await host.admin("POST", path, body);
      expect([path, res.status, res.body.error?.message]).toEqual([path, 400, expect.stringMatching(/credentials in the URL/)]);
      expect(JSON.stringify(res.body)).not.toContain("Pa55-endpoint-secret");
    }
  });
});

describe("tools and MCP servers", () => {
  it("registers an HTTP tool with masked headers and an object parameter schema", async () => {
    const tool = { name: "lookup", description: "Look up", parameters: { type: "object", properties: { q: { type: "string" } } }, endpoint: "https://tools.example/lookup", headers: { authorization: `Bearer ${API_KEY}` } };
    const created = await host.admin("POST", "/v1/admin/tools", tool);
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ name: "lookup", source: "http", endpoint: tool.endpoint, headers: { authorization: "********" }, parameters: tool.parameters });
    expect((await host.admin("POST", "/v1/admin/tools", tool)).status).toBe(409);
    // Dots are reserved for `{server}.{tool}`; arguments are always an object.
    expect((await host.admin("POST", "/v1/admin/tools", { ...tool, name: "a.b" })).status).toBe(400);
    expect((await host.admin("POST", "/v1/admin/tools", { ...tool, name: "arr", parameters: { type: "array" } })).status).toBe(400);
    // A schema the host cannot enforce is refused, saying why; a pattern only the `u` flag rejects is fine.
    const badPattern = await host.admin("POST", "/v1/admin/tools", { ...tool, name: "bad", parameters: { type: "object", properties: { q: { type: "string", pattern: "(" } } } });
    expect([badPattern.status, badPattern.body.error.code]).toEqual([400, "invalid_request"]);
    expect(badPattern.body.error.message).toContain('/properties/q/pattern: pattern "(" is not a regular expression this host runs');
    const badRef = await host.admin("POST", "/v1/admin/tools", { ...tool, name: "bad", parameters: { type: "object", properties: { q: { $ref: "#/$defs/Q" } } } });
    expect([badRef.status, badRef.body.error.message]).toEqual([400, expect.stringContaining('"#/$defs/Q" does not resolve')]);
    const nonUnicode = { type: "object", properties: { q: { type: "string", pattern: "^[a-z]+\\-[0-9]+$" } }, $defs: { Q: { type: "string" } } };
    expect((await host.admin("POST", "/v1/admin/tools", { ...tool, name: "non_unicode", parameters: nonUnicode })).status).toBe(201);
    expect(JSON.stringify((await host.admin("GET", "/v1/admin/tools")).body)).not.toContain(API_KEY);
    expect((await host.admin("DELETE", "/v1/admin/tools/lookup")).status).toBe(204);
    expect((await host.admin("GET", "/v1/admin/tools/lookup")).status).toBe(404);
  });

  it("discovers an MCP server's tools as {server}.{tool}, refreshes and deletes them with the server", async () => {
    const created = await host.admin("POST", "/v1/admin/mcp-servers", { name: "calc", url: mcp.url, headers: { authorization: `Bearer ${MCP_TOKEN}` } });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ name: "calc", url: mcp.url, headers: { authorization: "********" }, tools: ["calc.add", "calc.shout"], skipped_tools: [] });
    expect((await host.admin("POST", "/v1/admin/mcp-servers", { name: "calc", url: mcp.url })).status).toBe(409);

    const add = await host.admin("GET", "/v1/admin/tools/calc.add");
    expect(add.body).toMatchObject({ name: "calc.add", source: "mcp", mcp_server: "calc", description: "Add two numbers", parameters: { type: "object", required: ["a", "b"] } });
    expect(add.body.headers).toBeUndefined();
    // Discovered tools belong to their server.
    expect((await host.admin("DELETE", "/v1/admin/tools/calc.add")).status).toBe(409);

    const refreshed = await host.admin("POST", "/v1/admin/mcp-servers/calc/refresh");
    expect([refreshed.status, refreshed.body.tools]).toEqual([200, ["calc.add", "calc.shout"]]);
    expect(JSON.stringify((await host.admin("GET", "/v1/admin/mcp-servers")).body)).not.toContain(MCP_TOKEN);

    // A server one of whose tools an agent grants stays until the grant is gone.
    const agent = { agent_id: "uses-calc", name: "uses calc", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: "uses-calc" }, resource_policy: { tools: ["calc.shout"] } };
    expect((await host.admin("POST", "/v1/admin/agents", agent)).status).toBe(201);
    expect((await host.admin("DELETE", "/v1/admin/mcp-servers/calc")).status).toBe(409);
    expect((await host.admin("DELETE", "/v1/admin/agents/uses-calc")).status).toBe(200);
    expect((await host.admin("DELETE", "/v1/admin/mcp-servers/calc")).status).toBe(204);
    expect((await host.admin("GET", "/v1/admin/tools/calc.add")).status).toBe(404);
  });

  it("creates a server once when two POSTs race: one 201, one 409, the first never overwritten", async () => {
    const answers = await Promise.all(
      [mcp.url, shrinking.url].map((url) => host.admin("POST", "/v1/admin/mcp-servers", { name: "raced", url, headers: { authorization: `Bearer ${MCP_TOKEN}` } })),
    );
    expect(answers.map((a) => a.status).sort()).toEqual([201, 409]);
    const winner = answers.find((a) => a.status === 201)!.body;
    expect((await host.admin("GET", "/v1/admin/mcp-servers/raced")).body).toMatchObject({ url: winner.url, tools: winner.tools });
    expect((await host.admin("DELETE", "/v1/admin/mcp-servers/raced")).status).toBe(204);
  });

  it("refuses a refresh that would drop a tool an agent grants, naming the agent, as deleting it is refused", async () => {
    expect((await host.admin("POST", "/v1/admin/mcp-servers", { name: "shrinks", url: shrinking.url, headers: { authorization: `Bearer ${MCP_TOKEN}` } })).body.tools).toContain("shrinks.slow");
    const agent = { agent_id: "uses-slow", name: "uses slow", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: "uses-slow" }, resource_policy: { tools: ["shrinks.slow"] } };
    expect((await host.admin("POST", "/v1/admin/agents", agent)).status).toBe(201);
    shrinkingOpts.slowMs = undefined; // the server no longer lists `slow`
    const refused = await host.admin("POST", "/v1/admin/mcp-servers/shrinks/refresh");
    expect([refused.status, refused.body.error?.message]).toEqual([409, expect.stringMatching(/uses-slow/)]);
    expect((await host.admin("GET", "/v1/admin/tools/shrinks.slow")).status).toBe(200);
    // Once no agent grants it, the refresh drops it.
    expect((await host.admin("DELETE", "/v1/admin/agents/uses-slow")).status).toBe(200);
    const refreshed = await host.admin("POST", "/v1/admin/mcp-servers/shrinks/refresh");
    expect([refreshed.status, refreshed.body.tools]).toEqual([200, ["shrinks.add", "shrinks.shout"]]);
  });

  it("does not register a discovered tool whose schema it cannot enforce, and says why", async () => {
    const created = await host.admin("POST", "/v1/admin/mcp-servers", { name: "strict", url: strict.url, headers: { authorization: `Bearer ${MCP_TOKEN}` } });
    expect(created.status).toBe(201);
    expect(created.body.tools).toEqual(["strict.add", "strict.shout"]);
    expect(created.body.skipped_tools).toEqual([{ name: "broken", reason: expect.stringContaining('/properties/code/pattern: pattern "(" is not a regular expression this host runs') }]);
    expect((await host.admin("GET", "/v1/admin/tools/strict.broken")).status).toBe(404);
  });

  it("refuses an MCP server it cannot list with 502, saving nothing and showing no credential", async () => {
    const wrong = "wrong-token-0f3a9c5d2e";
    // Credentials in the URL too: a path token and a query token.
    const pathToken = "Tk7f3a9c5d2e1b8a4f6c";
    const queryToken = "q-0f3a9c5d2e7b";
    const url = `${mcp.url}/${pathToken}?key=${queryToken}`;
    const res = await host.admin("POST", "/v1/admin/mcp-servers", { name: "locked", url, headers: { authorization: `Bearer ${wrong}` } });
    expect([res.status, res.body.error.code]).toEqual([502, "bad_gateway"]);
    // The server's refusal echoes the credential and the URL it was sent: the host passes the refusal on, scrubbed.
    expect(res.body.error.message).toContain(`could not list the tools of MCP server ${mcp.url}/********?key=********:`);
    expect(res.body.error.message).toContain("unauthorised: [redacted] at /mcp/[redacted]?key=[redacted]");
    for (const secret of [wrong, pathToken, queryToken]) expect(JSON.stringify(res.body)).not.toContain(secret);
    expect((await host.admin("GET", "/v1/admin/mcp-servers/locked")).status).toBe(404);
  });
});

describe("knowledge bases", () => {
  it("registers with or without a key, masked, and deletes", async () => {
    const open = await host.admin("POST", "/v1/admin/knowledge-bases", { kb_id: "open", name: "Open", endpoint: "https://kb.example/search" });
    expect(open.body).toMatchObject({ kb_id: "open", name: "Open", endpoint: "https://kb.example/search", api_key: null });
    const keyed = await host.admin("POST", "/v1/admin/knowledge-bases", { name: "Keyed", description: "d", endpoint: "https://kb.example/s2", api_key: API_KEY });
    expect(keyed.body).toMatchObject({ kb_id: expect.stringMatching(/^kb_/), description: "d", api_key: "********" });
    expect((await host.admin("POST", "/v1/admin/knowledge-bases", { kb_id: "open", name: "again", endpoint: "https://kb.example" })).status).toBe(409);
    expect(JSON.stringify((await host.admin("GET", "/v1/admin/knowledge-bases")).body)).not.toContain(API_KEY);
    expect((await host.admin("DELETE", "/v1/admin/knowledge-bases/open")).status).toBe(204);
    expect((await host.admin("GET", "/v1/admin/knowledge-bases/open")).status).toBe(404);
  });
});

describe("agent grants", () => {
  it("accept only registered resources", async () => {
    await host.admin("POST", "/v1/admin/models", { model_id: "granted", name: "g", kind: "llm", base_url: "https://llm.example/v1", api_key: API_KEY, model: "g" });
    const agent = { agent_id: "grants", name: "grants", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: "grants" } };
    const refused = await host.admin("POST", "/v1/admin/agents", { ...agent, resource_policy: { models: ["granted"], fallback_models: ["ghost"], tools: ["nope"], knowledge_bases: ["void"] } });
    expect(refused.status).toBe(400);
    expect(refused.body.error.details.unknown).toEqual(["model ghost", "tool nope", "knowledge base void"]);
    const accepted = await host.admin("POST", "/v1/admin/agents", { ...agent, resource_policy: { models: ["granted"] } });
    expect(accepted.status).toBe(201);
    expect(accepted.body.resource_policy).toMatchObject({ models: ["granted"], fallback_models: [] });
  });
});

describe("a granted resource's DELETE", () => {
  it("names the agents granting it from their grants, never reading every agent whole", async () => {
    await host.admin("POST", "/v1/admin/models", { model_id: "held-m", name: "m", kind: "llm", base_url: "https://llm.example/v1", api_key: API_KEY, model: "m" });
    await host.admin("POST", "/v1/admin/tools", { name: "held-t", endpoint: "https://tools.example/held" });
    await host.admin("POST", "/v1/admin/knowledge-bases", { kb_id: "held-kb", name: "kb", endpoint: "https://kb.example/held" });
    expect((await host.admin("POST", "/v1/admin/mcp-servers", { name: "held", url: mcp.url, headers: { authorization: `Bearer ${MCP_TOKEN}` } })).status).toBe(201);
    const resource_policy = { models: ["held-m"], tools: ["held-t", "held.add"], knowledge_bases: ["held-kb"] };
    const agent = { agent_id: "holds", name: "holds", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: "holds" }, resource_policy };
    expect((await host.admin("POST", "/v1/admin/agents", agent)).status).toBe(201);
    const paths = ["/v1/admin/models/held-m", "/v1/admin/tools/held-t", "/v1/admin/knowledge-bases/held-kb", "/v1/admin/mcp-servers/held"];
    for (const path of paths) {
      // A read of agents whole names every column: the drill fails the first statement that does (an operator may have thousands of agents).
      host.databaseOutage({ queries: 1, matching: "delivery_policy_json" });
      try {
        const refused = await host.admin("DELETE", path);
        expect([path, refused.status, refused.body.error?.details]).toEqual([path, 409, { agents: ["holds"] }]);
      } finally {
        host.databaseOutage({ queries: 0 });
      }
    }
    expect((await host.admin("DELETE", "/v1/admin/agents/holds")).status).toBe(200);
    for (const path of paths) expect((await host.admin("DELETE", path)).status).toBe(204);
  });
});

/**
 * README "HTTP API": a request the host cannot take is a 400 (`invalid_request`); 500 is the host's own failure
 * (`internal`). Every admin route that takes an endpoint URL must refuse a value that is not a URL at all as a 400,
 * as it refuses `ftp://x` or `user:password@`, and not crash into a 500.
 */
const NOT_A_URL = "not a url";
const bodies: [string, Record<string, unknown>][] = [
  ["/v1/admin/runner-services", { base_url: NOT_A_URL }],
  ["/v1/admin/models", { name: "m", kind: "llm", base_url: NOT_A_URL, api_key: "k", model: "gpt" }],
  ["/v1/admin/tools", { name: "t", endpoint: NOT_A_URL }],
  ["/v1/admin/knowledge-bases", { name: "kb", endpoint: NOT_A_URL }],
  ["/v1/admin/mcp-servers", { name: "mcp", url: NOT_A_URL }],
  ["/v1/admin/bots", { platform: "slack", api_base_url: NOT_A_URL, credentials: { bot_token: "xoxb-1-2", signing_secret: "s".repeat(16) } }],
];

describe("an endpoint that is not a URL", () => {
  it("is a 400 invalid_request on every admin route that takes one, never a 500", async () => {
    const answers = [];
    for (const [path, body] of bodies) {
      const res = await host.admin("POST", path, body);
      answers.push({ path, status: res.status, code: res.body?.error?.code });
    }
    expect(answers).toEqual(bodies.map(([path]) => ({ path, status: 400, code: "invalid_request" })));
  });
});
