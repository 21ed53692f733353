import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listenLoopback, readBody, sendJson } from "../support/http-server";
import { startTestHost, type TestHost } from "../support/host";
import { startScriptedRunner } from "../support/scripted-runner";

/**
 * A stateful MCP server that forgets its sessions (a restart, a session TTL) answers a request naming an
 * unknown session with HTTP 404. MCP (streamable HTTP, session management): "When a client receives HTTP 404
 * in response to a request containing an Mcp-Session-Id, it MUST start a new session by sending a new
 * InitializeRequest". The server did not run the call, so the run's call should go through on a new session,
 * not fail as a non-retryable 4xx of the tool.
 */

let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
let up: Awaited<ReturnType<typeof listenLoopback>>;
const sessions = new Set<string>();
let nextSession = 0;
const seen: { method: string; session: string | null; status: number }[] = [];

beforeAll(async () => {
  up = await listenLoopback(async (req, res) => {
    const raw = await readBody(req);
    const session = (req.headers["mcp-session-id"] as string | undefined) ?? null;
    if (req.method === "DELETE") {
      sessions.delete(session ?? "");
      res.writeHead(200);
      return void res.end();
    }
    if (req.method !== "POST") {
      res.writeHead(405);
      return void res.end();
    }
    const msg = JSON.parse(raw);
    if (msg.method !== "initialize" && (!session || !sessions.has(session))) {
      seen.push({ method: msg.method, session, status: 404 });
      return sendJson(res, 404, { jsonrpc: "2.0", id: msg.id ?? null, error: { code: -32001, message: "Session not found" } });
    }
    seen.push({ method: msg.method, session, status: 200 });
    if (msg.method === "initialize") {
      const id = `sess-${++nextSession}`;
      sessions.add(id);
      res.setHeader("mcp-session-id", id);
      return sendJson(res, 200, { jsonrpc: "2.0", id: msg.id, result: { protocolVersion: msg.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: "s", version: "1" } } });
    }
    if (msg.id === undefined) {
      res.writeHead(202);
      return void res.end();
    }
    const result = msg.method === "tools/list" ? { tools: [{ name: "echo", inputSchema: { type: "object" } }] } : { content: [{ type: "text", text: "ok" }] };
    sendJson(res, 200, { jsonrpc: "2.0", id: msg.id, result });
  });
  runner = await startScriptedRunner({ name: "mcp-expiry", runners: [{ name: "default", label: { en_US: "e" }, permissions: { tools: ["detail", "call"] } }] });
  host = await startTestHost({});
  const r = await host.admin("POST", "/v1/admin/mcp-servers", { name: "srv", url: `${up.url}/mcp` });
  if (r.status !== 201) throw new Error(JSON.stringify(r.body));
  await runner.register(host);
  const agent = await host.admin("POST", "/v1/admin/agents", {
    agent_id: "e", name: "e", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "global" },
    resource_policy: { tools: ["srv.echo"] },
  });
  if (agent.status !== 201) throw new Error(JSON.stringify(agent.body));
});
afterAll(async () => {
  await host?.dispose();
  await Promise.all([runner?.close(), up?.close()]);
});

describe("a run's MCP session that the server no longer knows (HTTP 404)", () => {
  it("is replaced by a new session and the call goes through, instead of failing as a non-retryable 4xx", async () => {
    const { result } = await runner.run(host, "mcp-expired", async (api) => {
      const first = await api("tool.call", { tool_name: "srv.echo", parameters: {} });
      sessions.clear(); // the server restarts: every session it issued is gone
      const second = await api("tool.call", { tool_name: "srv.echo", parameters: {} });
      return { first: first.status, second: { status: second.status, error: second.body.error ?? null } };
    });
    expect(result.first).toBe(200);
    expect(result.second).toEqual({ status: 200, error: null });
    // The host started a new session (a second initialize) after the 404.
    expect(seen.filter((s) => s.method === "initialize").length).toBeGreaterThanOrEqual(2);
  });
});
