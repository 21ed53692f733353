import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listenLoopback, readBody, sendJson } from "../support/http-server";
import { startTestHost, type TestHost } from "../support/host";
import { startScriptedRunner } from "../support/scripted-runner";

/**
 * A tool that refuses the call (its credentials revoked: HTTP 401; arguments it will not take) fails the same
 * way whatever carries it: 502 with `upstream_status` and `retryable: false` (a 4xx is no provider fault),
 * through an HTTP tool or an MCP server (an HTTP 401, a JSON-RPC "Invalid params" answer).
 */

const KEY = "mcp-err-key-1f2e3d4c5b6a";
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
let up: Awaited<ReturnType<typeof listenLoopback>>;
let revoked = false;

beforeAll(async () => {
  up = await listenLoopback(async (req, res) => {
    const raw = await readBody(req);
    if (req.url === "/http-tool") return revoked ? sendJson(res, 401, { error: "key revoked" }) : sendJson(res, 200, { ok: true });
    if (req.method !== "POST") {
      res.writeHead(405);
      return void res.end();
    }
    const msg = JSON.parse(raw);
    if (msg.method === "tools/call" && revoked) return sendJson(res, 401, { error: "key revoked" });
    if (msg.id === undefined) {
      res.writeHead(202);
      return void res.end();
    }
    if (msg.method === "tools/call" && msg.params.name === "strict") {
      return sendJson(res, 200, { jsonrpc: "2.0", id: msg.id, error: { code: -32602, message: "Invalid params: unknown field 'x'" } });
    }
    const result =
      msg.method === "initialize"
        ? { protocolVersion: msg.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: "s", version: "1" } }
        : msg.method === "tools/list"
          ? { tools: [{ name: "strict", inputSchema: { type: "object" } }, { name: "echo", inputSchema: { type: "object" } }] }
          : { content: [{ type: "text", text: "ok" }] };
    sendJson(res, 200, { jsonrpc: "2.0", id: msg.id, result });
  });
  runner = await startScriptedRunner({ name: "mcp-errors", runners: [{ name: "default", label: { en_US: "e" }, permissions: { tools: ["detail", "call"] } }] });
  host = await startTestHost({});
  for (const [path, body] of [
    ["/v1/admin/mcp-servers", { name: "srv", url: `${up.url}/mcp`, headers: { authorization: `Bearer ${KEY}` } }],
    ["/v1/admin/tools", { name: "http_tool", endpoint: `${up.url}/http-tool`, headers: { authorization: `Bearer ${KEY}` } }],
  ] as const) {
    const r = await host.admin("POST", path, body);
    if (r.status !== 201) throw new Error(JSON.stringify(r.body));
  }
  await runner.register(host);
  const agent = await host.admin("POST", "/v1/admin/agents", {
    agent_id: "e", name: "e", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "global" },
    resource_policy: { tools: ["srv.strict", "srv.echo", "http_tool"] },
  });
  if (agent.status !== 201) throw new Error(JSON.stringify(agent.body));
});
afterAll(async () => {
  await host?.dispose();
  await Promise.all([runner?.close(), up?.close()]);
});

const shape = (r: any) => ({ status: r.status, retryable: r.body.error?.retryable, upstream_status: r.body.error?.details?.upstream_status });

describe("an MCP tool that refuses the call", () => {
  it("answering JSON-RPC Invalid params is not reported as retryable", async () => {
    const { result } = await runner.run(host, "mcp-invalid", async (api) => api("tool.call", { tool_name: "srv.strict", parameters: { x: 1 } }));
    expect(result.status).toBe(502);
    expect(result.body.error.retryable).toBe(false);
  });

  it("answering HTTP 401 is reported like an HTTP tool's 401: upstream_status 401, not retryable", async () => {
    revoked = true;
    try {
      const { result } = await runner.run(host, "mcp-401", async (api) => ({
        http: await api("tool.call", { tool_name: "http_tool", parameters: {} }),
        mcp: await api("tool.call", { tool_name: "srv.echo", parameters: {} }),
      }));
      expect(shape(result.http)).toEqual({ status: 502, retryable: false, upstream_status: 401 });
      expect(shape(result.mcp)).toEqual(shape(result.http));
    } finally {
      revoked = false;
    }
  });
});
