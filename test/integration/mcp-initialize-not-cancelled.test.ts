import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listenLoopback, readBody } from "../support/http-server";
import { startTestHost, type TestHost } from "../support/host";
import { startScriptedRunner } from "../support/scripted-runner";

/**
 * MCP (basic/utilities/cancellation): "The `initialize` request MUST NOT be cancelled by clients", and a
 * cancellation may only name a request still in progress. The handshake gets a signal of its own, let go once it
 * is done: when the run ends, its MCP session is ended with DELETE, and no cancellation names the `initialize`.
 */

const TOKEN = "mcp-cancel-token-0a1b2c3d4e5f";
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
let mcp: Awaited<ReturnType<typeof listenLoopback>>;
const received: { method?: string; id?: unknown; params?: any; session?: string }[] = [];

beforeAll(async () => {
  // A stateful streamable-HTTP MCP server answering JSON.
  mcp = await listenLoopback(async (req, res) => {
    if (req.method === "DELETE") {
      received.push({ method: "DELETE", session: req.headers["mcp-session-id"] as string });
      res.writeHead(200);
      return void res.end();
    }
    if (req.method !== "POST") {
      res.writeHead(405);
      return void res.end();
    }
    const msg = JSON.parse(await readBody(req));
    received.push({ method: msg.method, id: msg.id, params: msg.params, session: req.headers["mcp-session-id"] as string });
    if (msg.id === undefined) {
      res.writeHead(202);
      return void res.end();
    }
    const result =
      msg.method === "initialize"
        ? { protocolVersion: msg.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: "calc", version: "1" } }
        : msg.method === "tools/list"
          ? { tools: [{ name: "add", description: "adds", inputSchema: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } } } }] }
          : { content: [{ type: "text", text: String(msg.params.arguments.a + msg.params.arguments.b) }] };
    res.writeHead(200, { "content-type": "application/json", "mcp-session-id": "session-42" });
    res.end(JSON.stringify({ jsonrpc: "2.0", id: msg.id, result }));
  });
  runner = await startScriptedRunner({ name: "mcp-cancel", runners: [{ name: "default", label: { en_US: "m" }, permissions: { tools: ["detail", "call"] } }] });
  host = await startTestHost({});
  const server = await host.admin("POST", "/v1/admin/mcp-servers", { name: "calc", url: `${mcp.url}/mcp`, headers: { authorization: `Bearer ${TOKEN}` } });
  if (server.status !== 201) throw new Error(JSON.stringify(server.body));
  await runner.register(host);
  const agent = await host.admin("POST", "/v1/admin/agents", {
    agent_id: "m", name: "m", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "global" }, resource_policy: { tools: ["calc.add"] },
  });
  if (agent.status !== 201) throw new Error(JSON.stringify(agent.body));
});
afterAll(async () => {
  await host?.dispose();
  await Promise.all([runner?.close(), mcp?.close()]);
});

describe("a run's MCP session", () => {
  it("is ended with DELETE when the run ends, without cancelling the initialize request", async () => {
    const from = received.length;
    const { result } = await runner.run(host, "cancel-init", async (api) => [
      await api("tool.call", { tool_name: "calc.add", parameters: { a: 1, b: 2 } }),
      await api("tool.call", { tool_name: "calc.add", parameters: { a: 3, b: 4 } }),
    ]);
    expect(result.map((r: any) => r.body.data?.result?.content?.[0]?.text)).toEqual(["3", "7"]);
    // The session is ended once the run is over.
    for (let i = 0; i < 50 && !received.slice(from).some((m) => m.method === "DELETE"); i++) await new Promise((r) => setTimeout(r, 100));
    const seen = received.slice(from);
    const initialize = seen.find((m) => m.method === "initialize");
    expect(seen.map((m) => m.method)).toContain("DELETE");
    // Every call answered: nothing was in progress, so nothing may be cancelled (least of all initialize).
    expect(seen.filter((m) => m.method === "notifications/cancelled").map((m) => m.params)).toEqual([]);
    expect(initialize?.id).toBeDefined();
  });
});
