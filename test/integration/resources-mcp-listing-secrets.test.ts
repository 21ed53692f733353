import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { listenLoopback, readBody } from "../support/http-server";
import { startTestHost, type TestHost } from "../support/host";
import { startScriptedRunner } from "../support/scripted-runner";

/**
 * What an MCP server answers to tools/list (a tool's description, its input schema's descriptions) is shown to
 * every run granted the tool and to operators: it is scrubbed of the credential the server was called with, as
 * everything else that comes back from an upstream is.
 */
const TOKEN = "mcp-echo-token-0123456789abcdefABCDEF";
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
let mcp: Awaited<ReturnType<typeof listenLoopback>>;
const seenByRunner: string[] = [];

beforeAll(async () => {
  mcp = await listenLoopback(async (req, res) => {
    const auth = req.headers.authorization ?? "";
    if (auth !== `Bearer ${TOKEN}`) {
      res.writeHead(401);
      return void res.end();
    }
    const raw = await readBody(req);
    const server = new McpServer({ name: "careless", version: "1.0.0" });
    // A gateway that documents how it was called, credential included.
    server.registerTool(
      "search",
      { description: `Search the index (called with ${auth})`, inputSchema: { q: z.string().describe(`query; gateway key ${auth.slice(7)}`) } },
      async ({ q }) => ({ content: [{ type: "text", text: q }] }),
    );
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on("close", () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, raw ? JSON.parse(raw) : undefined);
  });
  runner = await startScriptedRunner({
    name: "mcpecho",
    runners: [{ name: "default", label: { en_US: "mcpecho" }, permissions: { tools: ["detail", "call"] } }],
    observe: (text) => seenByRunner.push(text),
  });
  host = await startTestHost({ captureLogs: true });
  const reg = await host.admin("POST", "/v1/admin/mcp-servers", { name: "gw", url: `${mcp.url}/mcp`, headers: { authorization: `Bearer ${TOKEN}` } });
  if (reg.status !== 201) throw new Error(JSON.stringify(reg.body));
  await runner.register(host);
  const agent = await host.admin("POST", "/v1/admin/agents", {
    agent_id: "mcpecho", name: "mcpecho", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "global" }, resource_policy: { tools: ["gw.search"] },
  });
  if (agent.status !== 201) throw new Error(JSON.stringify(agent.body));
});

afterAll(async () => {
  await host?.dispose();
  await Promise.all([runner?.close(), mcp?.close()]);
});

describe("MCP discovery answers and secrets", () => {
  it("an MCP server's credential quoted in its tool listing never reaches a runner (ctx.resources, tool.detail)", async () => {
    seenByRunner.length = 0;
    const { result } = await runner.run(host, "mcp-echo", async (api, ctx) => ({
      listed: ctx.resources.tools.map((t: any) => ({ description: t.description, parameters: t.parameters })),
      detail: (await api("tool.detail", { tool_name: "gw.search" })).body,
    }));
    expect(JSON.stringify(result)).not.toContain(TOKEN);
    expect(seenByRunner.filter((t) => t.includes(TOKEN)).length).toBe(0);
  });

  it("nor an operator reading the tool list (GET /v1/admin/tools, GET /v1/admin/mcp-servers/gw)", async () => {
    const tools = await host.admin("GET", "/v1/admin/tools");
    expect(JSON.stringify(tools.body)).not.toContain(TOKEN);
    expect(tools.body.items.find((t: any) => t.name === "gw.search")?.description).toBe("Search the index (called with [redacted])");
  });
});
