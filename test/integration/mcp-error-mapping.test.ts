import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listenLoopback, readBody, sendJson } from "../support/http-server";
import { startTestHost, type TestHost } from "../support/host";
import { startScriptedRunner } from "../support/scripted-runner";

/**
 * A tool that refuses the call (its credentials revoked: HTTP 401; arguments it will not take) fails the same
 * way whatever carries it: 502 with `upstream_status` and `retryable: false` (a 4xx is no provider fault),
 * through an HTTP tool or an MCP server (an HTTP 401, a JSON-RPC "Invalid params" answer). A tool that is busy for now
 * (429 with Retry-After) says when to come back, through either carrier: a retryable 502 with `retry_after_ms`.
 */

const KEY = "mcp-err-key-1f2e3d4c5b6a";
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
let up: Awaited<ReturnType<typeof listenLoopback>>;
let revoked = false;
/** `initialize` requests the MCP server has answered: a new session each. */
let initializes = 0;

beforeAll(async () => {
  up = await listenLoopback(async (req, res) => {
    const raw = await readBody(req);
    if (req.url === "/http-tool") return revoked ? sendJson(res, 401, { error: "key revoked" }) : sendJson(res, 200, { ok: true });
    if (req.url === "/http-busy") return busy(res);
    if (req.method !== "POST") {
      res.writeHead(405);
      return void res.end();
    }
    const msg = JSON.parse(raw);
    if (msg.method === "initialize") initializes++;
    if (msg.method === "tools/call" && revoked) return sendJson(res, 401, { error: "key revoked" });
    if (msg.method === "tools/call" && msg.params.name === "busy") return busy(res);
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
          ? { tools: [{ name: "strict", inputSchema: { type: "object" } }, { name: "echo", inputSchema: { type: "object" } }, { name: "busy", inputSchema: { type: "object" } }] }
          : { content: [{ type: "text", text: "ok" }] };
    sendJson(res, 200, { jsonrpc: "2.0", id: msg.id, result });
  });
  runner = await startScriptedRunner({ name: "mcp-errors", runners: [{ name: "default", label: { en_US: "e" }, permissions: { tools: ["detail", "call"] } }] });
  host = await startTestHost({});
  for (const [path, body] of [
    ["/v1/admin/mcp-servers", { name: "srv", url: `${up.url}/mcp`, headers: { authorization: `Bearer ${KEY}` } }],
    ["/v1/admin/tools", { name: "http_tool", endpoint: `${up.url}/http-tool`, headers: { authorization: `Bearer ${KEY}` } }],
    ["/v1/admin/tools", { name: "http_busy", endpoint: `${up.url}/http-busy`, headers: { authorization: `Bearer ${KEY}` } }],
  ] as const) {
    const r = await host.admin("POST", path, body);
    if (r.status !== 201) throw new Error(JSON.stringify(r.body));
  }
  await runner.register(host);
  const agent = await host.admin("POST", "/v1/admin/agents", {
    agent_id: "e", name: "e", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "global" },
    resource_policy: { tools: ["srv.strict", "srv.echo", "http_tool", "srv.busy", "http_busy"] },
  });
  if (agent.status !== 201) throw new Error(JSON.stringify(agent.body));
});
afterAll(async () => {
  await host?.dispose();
  await Promise.all([runner?.close(), up?.close()]);
});

/** Throttled: come back in 3 seconds. */
function busy(res: import("node:http").ServerResponse) {
  res.writeHead(429, { "content-type": "application/json", "retry-after": "3" });
  res.end(JSON.stringify({ error: "too many calls, slow down" }));
}

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

describe("a tool that is busy for now (429 with Retry-After)", () => {
  it("through an MCP server, is reported like an HTTP tool's: retryable, upstream_status 429, retry_after_ms from the header", async () => {
    const { result } = await runner.run(host, "busy", async (api) => ({
      http: await api("tool.call", { tool_name: "http_busy", parameters: {} }),
      mcp: await api("tool.call", { tool_name: "srv.busy", parameters: {} }),
    }));
    const throttled = (r: any) => ({ ...shape(r), retry_after_ms: r.body.error?.details?.retry_after_ms });
    expect(throttled(result.http)).toEqual({ status: 502, retryable: true, upstream_status: 429, retry_after_ms: 3000 });
    expect(throttled(result.mcp)).toEqual(throttled(result.http));
    expect(result.mcp.body.error.message).toContain("too many calls, slow down");
  });

  it("keeps the run's MCP session: the server said to come back, not that the session failed", async () => {
    const before = initializes;
    const { result } = await runner.run(host, "busy-session", async (api) => ({
      busy: (await api("tool.call", { tool_name: "srv.busy", parameters: {} })).status,
      echo: (await api("tool.call", { tool_name: "srv.echo", parameters: {} })).status,
    }));
    expect(result).toEqual({ busy: 502, echo: 200 });
    expect(initializes - before).toBe(1);
  });
});
