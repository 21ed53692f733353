import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listenLoopback, readBody, sendJson } from "../support/http-server";
import { startTestHost, type TestHost } from "../support/host";
import { startScriptedRunner } from "../support/scripted-runner";

/**
 * A run's MCP session meeting a server fault, against a small stateful streamable-HTTP server (raw, for control
 * of each answer's bytes). README (MCP server): "a run keeps one session per server from its first call to its end".
 * - The server forgets its sessions (a restart, a session TTL) and answers a request naming one with HTTP 404.
 *   MCP (session management): the client "MUST start a new session by sending a new InitializeRequest". The server
 *   did not run the call, so it goes through on a new session, not as a non-retryable 4xx of the tool.
 * - The server answers `tools/call` as an event stream and its connection breaks before the answer: the call
 *   fails then (a 502, not a 408 after TOOL_CALL_TIMEOUT_MS as if the tool were slow), and the session is dropped.
 */

const TOOL_TIMEOUT_MS = 8_000;
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
let up: Awaited<ReturnType<typeof listenLoopback>>;
const sessions = new Set<string>();
let nextSession = 0;
const seen: { method: string; session: string | null; status: number }[] = [];
const initializes = () => seen.filter((s) => s.method === "initialize").length;

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
    if (msg.method === "tools/list") return sendJson(res, 200, { jsonrpc: "2.0", id: msg.id, result: { tools: [{ name: "crash", inputSchema: { type: "object" } }, { name: "echo", inputSchema: { type: "object" } }] } });
    if (msg.params?.name === "crash") {
      // The answer starts as an event stream, then the server's process dies: the connection breaks, no answer.
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      res.write(": working\n\n");
      setTimeout(() => res.socket?.destroy(), 200);
      return;
    }
    sendJson(res, 200, { jsonrpc: "2.0", id: msg.id, result: { content: [{ type: "text", text: "ok" }] } });
  });
  runner = await startScriptedRunner({ name: "mcp-faults", runners: [{ name: "default", label: { en_US: "f" }, permissions: { tools: ["detail", "call"] } }] });
  host = await startTestHost({ vars: { TOOL_CALL_TIMEOUT_MS: String(TOOL_TIMEOUT_MS) } });
  const r = await host.admin("POST", "/v1/admin/mcp-servers", { name: "srv", url: `${up.url}/mcp` });
  if (r.status !== 201) throw new Error(JSON.stringify(r.body));
  await runner.register(host);
  const agent = await host.admin("POST", "/v1/admin/agents", {
    agent_id: "f", name: "f", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "global" },
    resource_policy: { tools: ["srv.crash", "srv.echo"] },
  });
  if (agent.status !== 201) throw new Error(JSON.stringify(agent.body));
});
afterAll(async () => {
  await host?.dispose();
  await Promise.all([runner?.close(), up?.close()]);
});

describe("a run's MCP session that the server no longer knows (HTTP 404)", () => {
  it("is replaced by a new session and the call goes through, instead of failing as a non-retryable 4xx", async () => {
    const before = initializes();
    const { result } = await runner.run(host, "mcp-expired", async (api) => {
      const first = await api("tool.call", { tool_name: "srv.echo", parameters: {} });
      sessions.clear(); // the server restarts: every session it issued is gone
      const second = await api("tool.call", { tool_name: "srv.echo", parameters: {} });
      return { first: first.status, second: { status: second.status, error: second.body.error ?? null } };
    });
    expect(result.first).toBe(200);
    expect(result.second).toEqual({ status: 200, error: null });
    // The host started a new session (a second initialize) after the 404.
    expect(initializes() - before).toBeGreaterThanOrEqual(2);
  });
});

describe("an MCP tool call whose event-stream answer breaks off before the answer", () => {
  it("fails when the connection breaks (502), not at the tool timeout (408), and the next call gets a new session", async () => {
    const before = initializes();
    const { result } = await runner.run(host, "mcp-broken", async (api) => {
      const started = Date.now();
      const crash = await api("tool.call", { tool_name: "srv.crash", parameters: {} });
      const took = Date.now() - started;
      const echo = await api("tool.call", { tool_name: "srv.echo", parameters: {} });
      return { crash: { status: crash.status, code: crash.body.error?.code }, took, echo: echo.status };
    });
    expect(result.crash.status).toBe(502);
    expect(result.took).toBeLessThan(TOOL_TIMEOUT_MS / 2);
    expect(result.echo).toBe(200);
    // The broken session was dropped: the call after it opened a new one.
    expect(initializes() - before).toBe(2);
  }, 30_000);
});
