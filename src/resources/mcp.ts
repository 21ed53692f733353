import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { mcpSchemaValidator } from "./json-schema";
import { UpstreamError } from "./upstream";

export interface McpServerTarget {
  url: string;
  headers: Record<string, string>;
}

export interface McpToolInfo {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
}

/** MCP tool names per the spec; anything else is skipped at discovery. */
const MCP_TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/;
const MAX_DISCOVERY_PAGES = 20;
const CLIENT_INFO = { name: "agent-host", version: "1" };
/** The SDK's own request timeout trails the caller's signal, so the caller's reason (deadline, timeout) wins. */
const SDK_TIMEOUT_SLACK_MS = 1_000;

function upstreamOf(err: unknown, signal: AbortSignal): unknown {
  // An abort carries the host's own reason (deadline, timeout): keep it.
  if (signal.aborted && signal.reason instanceof Error && signal.reason.name !== "AbortError") return signal.reason;
  if (err instanceof UpstreamError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new UpstreamError(err instanceof McpError ? "invalid_response" : "network", `the MCP server failed: ${message}`, undefined, { cause: err });
}

/**
 * One short MCP session over streamable HTTP (official SDK client): connect,
 * do `work`, close. Sessions are not kept between calls, so nothing is held
 * in a Durable Object that could outlive its run.
 */
async function withSession<T>(server: McpServerTarget, signal: AbortSignal, timeoutMs: number, work: (client: Client) => Promise<T>): Promise<T> {
  // Our own validator: the SDK's default (Ajv) compiles code at run time, which workerd forbids.
  const client = new Client(CLIENT_INFO, { jsonSchemaValidator: mcpSchemaValidator });
  const transport = new StreamableHTTPClientTransport(new URL(server.url), { requestInit: { headers: server.headers } });
  try {
    await client.connect(transport, { signal, timeout: timeoutMs + SDK_TIMEOUT_SLACK_MS });
    return await work(client);
  } catch (err) {
    throw upstreamOf(err, signal);
  } finally {
    // Ends a stateful server's session (DELETE); a stateless server has none.
    await transport.terminateSession().catch(() => {});
    await client.close().catch(() => {});
  }
}

/** Every tool the server lists (following pagination). */
export function discoverMcpTools(server: McpServerTarget, opts: { signal: AbortSignal; timeoutMs: number }): Promise<{ tools: McpToolInfo[]; skipped: string[] }> {
  return withSession(server, opts.signal, opts.timeoutMs, async (client) => {
    const tools: McpToolInfo[] = [];
    const skipped: string[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < MAX_DISCOVERY_PAGES; page++) {
      const listed = await client.listTools(cursor ? { cursor } : undefined, { signal: opts.signal, timeout: opts.timeoutMs + SDK_TIMEOUT_SLACK_MS });
      for (const t of listed.tools) {
        if (MCP_TOOL_NAME.test(t.name)) tools.push({ name: t.name, description: t.description ?? "", inputSchema: t.inputSchema as Record<string, unknown> });
        else skipped.push(t.name);
      }
      cursor = listed.nextCursor;
      if (!cursor) break;
    }
    return { tools, skipped };
  });
}

export interface McpToolResult {
  content: unknown[];
  structuredContent?: Record<string, unknown>;
  isError: boolean;
}

/** `tools/call`. A tool-level failure (`isError`) is a result, for the model to read, not an exception. */
export function callMcpTool(
  server: McpServerTarget,
  call: { name: string; arguments: Record<string, unknown> },
  opts: { signal: AbortSignal; timeoutMs: number },
): Promise<McpToolResult> {
  return withSession(server, opts.signal, opts.timeoutMs, async (client) => {
    const result = await client.callTool(call, undefined, { signal: opts.signal, timeout: opts.timeoutMs + SDK_TIMEOUT_SLACK_MS });
    return {
      content: Array.isArray(result.content) ? result.content : [],
      ...(result.structuredContent ? { structuredContent: result.structuredContent as Record<string, unknown> } : {}),
      isError: result.isError === true,
    };
  });
}
