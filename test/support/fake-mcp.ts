import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";
import { listenLoopback, readBody, sendJson } from "./http-server";

/**
 * A real MCP server (the official SDK's McpServer over streamable HTTP,
 * stateless) on loopback, at any path, requiring a bearer token; a refusal
 * echoes the credential and the URL it was sent, as careless servers do. Tools: `add` (with an
 * output schema, which the SDK client's default validator cannot handle in
 * workerd) and `shout`; with `hugeBytes`, also `huge` (a text result of that
 * many bytes); with `brokenTool`, also `broken`, whose input schema has a
 * pattern no JavaScript engine compiles; with `slowMs`, also `slow`, which
 * answers after that long.
 *
 * With `sessionId` it names a session on every answer, so the client ends it
 * with DELETE at the end; with `hangOnDelete` that DELETE is never answered.
 * With `hangOnInitialized` it answers `initialize` but never the client's
 * `notifications/initialized`, so the handshake never completes. `opts.token` and `opts.beforeList` (awaited
 * before a `tools/list` is answered) are read at each request; `authorizations` holds what every request carried.
 */
export async function startFakeMcpServer(opts: {
  token: string;
  sessionId?: string;
  hangOnDelete?: boolean;
  hugeBytes?: number;
  brokenTool?: boolean;
  slowMs?: number;
  hangOnInitialized?: boolean;
  beforeList?: () => Promise<void>;
}) {
  const calls: { method: string | undefined; tool?: string }[] = [];
  const authorizations: { method: string | undefined; authorization: string | undefined }[] = [];
  const server = await listenLoopback(async (req, res) => {
    authorizations.push({ method: req.method, authorization: req.headers.authorization });
    if (req.headers.authorization !== `Bearer ${opts.token}`) return sendJson(res, 401, { error: `unauthorised: ${req.headers.authorization ?? "no credentials"} at ${req.url}` });
    if (req.method === "DELETE") {
      calls.push({ method: "DELETE" });
      if (opts.hangOnDelete) return; // accepted, never answered
      res.writeHead(200);
      return void res.end();
    }
    const raw = await readBody(req);
    const message = raw ? JSON.parse(raw) : undefined;
    calls.push({ method: message?.method, tool: message?.params?.name });
    if (opts.hangOnInitialized && message?.method === "notifications/initialized") return;
    if (message?.method === "tools/list") await opts.beforeList?.();
    const mcp = new McpServer({ name: "calc", version: "1.0.0" });
    mcp.registerTool(
      "add",
      { description: "Add two numbers", inputSchema: { a: z.number(), b: z.number() }, outputSchema: { sum: z.number() } },
      async ({ a, b }) => ({ content: [{ type: "text", text: String(a + b) }], structuredContent: { sum: a + b } }),
    );
    mcp.registerTool("shout", { description: "Upper-case a text", inputSchema: { text: z.string() } }, async ({ text }) => ({
      content: [{ type: "text", text: text.toUpperCase() }],
    }));
    if (opts.hugeBytes) {
      const bytes = opts.hugeBytes;
      mcp.registerTool("huge", { description: "A very large answer", inputSchema: {} }, async () => ({ content: [{ type: "text", text: "x".repeat(bytes) }] }));
    }
    if (opts.slowMs) {
      const ms = opts.slowMs;
      mcp.registerTool("slow", { description: "Answers after a while", inputSchema: {} }, async () => {
        await new Promise((r) => setTimeout(r, ms));
        return { content: [{ type: "text", text: "slow" }] };
      });
    }
    if (opts.brokenTool) {
      mcp.registerTool("broken", { description: "Declares a pattern that is not a regular expression", inputSchema: { code: z.string().meta({ pattern: "(" }) } }, async () => ({
        content: [{ type: "text", text: "unreachable" }],
      }));
    }
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on("close", () => {
      void transport.close();
      void mcp.close();
    });
    // A stateless transport ignores the session id the client sends back; the client still ends the session.
    if (opts.sessionId) res.setHeader("mcp-session-id", opts.sessionId);
    await mcp.connect(transport);
    await transport.handleRequest(req, res, message);
  });
  return { url: `${server.url}/mcp`, calls, authorizations, close: server.close };
}
