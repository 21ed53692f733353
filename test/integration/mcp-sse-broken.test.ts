import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listenLoopback, readBody, sendJson } from "../support/http-server";
import { startTestHost, type TestHost } from "../support/host";
import { startScriptedRunner } from "../support/scripted-runner";

/**
 * README (MCP server): "a run keeps one session per server from its first call to its end (a call whose
 * connection breaks or goes unanswered drops it, and the next opens a new one ...)". A server answering
 * `tools/call` as an event stream (streamable HTTP lets it) whose connection breaks before the answer: the
 * call fails then (a 502, not a 408 after TOOL_CALL_TIMEOUT_MS as if the tool were slow), and the session
 * is dropped: the next call opens a new one.
 */

const TOOL_TIMEOUT_MS = 8_000;
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
let up: Awaited<ReturnType<typeof listenLoopback>>;
let nextSession = 0;
const initializes: string[] = [];

beforeAll(async () => {
  up = await listenLoopback(async (req, res) => {
    const raw = await readBody(req);
    if (req.method === "DELETE") {
      res.writeHead(200);
      return void res.end();
    }
    if (req.method !== "POST") {
      res.writeHead(405);
      return void res.end();
    }
    const msg = JSON.parse(raw);
    if (msg.method === "initialize") {
      const id = `sess-${++nextSession}`;
      initializes.push(id);
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
  runner = await startScriptedRunner({ name: "mcp-broken", runners: [{ name: "default", label: { en_US: "b" }, permissions: { tools: ["detail", "call"] } }] });
  host = await startTestHost({ vars: { TOOL_CALL_TIMEOUT_MS: String(TOOL_TIMEOUT_MS) } });
  const r = await host.admin("POST", "/v1/admin/mcp-servers", { name: "srv", url: `${up.url}/mcp` });
  if (r.status !== 201) throw new Error(JSON.stringify(r.body));
  await runner.register(host);
  const agent = await host.admin("POST", "/v1/admin/agents", {
    agent_id: "b", name: "b", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "global" },
    resource_policy: { tools: ["srv.crash", "srv.echo"] },
  });
  if (agent.status !== 201) throw new Error(JSON.stringify(agent.body));
});
afterAll(async () => {
  await host?.dispose();
  await Promise.all([runner?.close(), up?.close()]);
});

describe("an MCP tool call whose event-stream answer breaks off before the answer", () => {
  it("fails when the connection breaks (502), not at the tool timeout (408), and the next call gets a new session", async () => {
    const before = initializes.length;
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
    expect(initializes.length - before).toBe(2);
  }, 30_000);
});
