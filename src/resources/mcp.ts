import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import type { JsonSchema } from "./json-schema";
import { schemaProblems } from "./json-schema-problems";
import { mcpSchemaValidator } from "./mcp-schema-validator";
import { cappedFetch, UpstreamError, type TakeBytes } from "./upstream";
import { heldAnswers, throttledAnswers, watchAnswers } from "./mcp-answers";
import { AnswerMeters, MeteredTransport } from "./mcp-answer-meters";

export interface McpServerTarget {
  url: string;
  headers: Record<string, string>;
  /** The registered server's name: a run's session of it opened with other credentials or at another URL is superseded. */
  name?: string;
}

export interface McpToolInfo {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
}

/** MCP tool names per the spec; anything else is skipped at discovery. */
const MCP_TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/;
export const MAX_DISCOVERY_PAGES = 20;
const CLIENT_INFO = { name: "agent-host", version: "1" };
/** The SDK's own request timeout trails the caller's signal, so the caller's reason (deadline, timeout) wins. */
const SDK_TIMEOUT_SLACK_MS = 1_000;
/** Ending a stateful server's session is a courtesy: it may not hold the call longer than this. */
const TERMINATE_WAIT_MS = 1_000;

export interface McpCallOptions {
  signal: AbortSignal;
  timeoutMs: number;
  /** Largest body read from the server (each HTTP answer, JSON or event stream). */
  maxBytes: number;
  /** Counts the call's answer as it is read, against what the host may hold at once; throws to refuse more. */
  take?: TakeBytes;
}

function upstreamOf(err: unknown, signal: AbortSignal): unknown {
  // An abort carries the host's own reason (deadline, timeout): keep it.
  if (signal.aborted && signal.reason instanceof Error && signal.reason.name !== "AbortError") return signal.reason;
  if (err instanceof UpstreamError) return err;
  // The client checks each answer against MCP's schemas (zod: its mini build's error is a `$ZodError`): one that fails is
  // said to be that, not dumped as zod's issues.
  if (err instanceof Error && (err.name === "ZodError" || err.name === "$ZodError")) return new UpstreamError("invalid_response", "the MCP server's answer is not a valid MCP response", undefined, { cause: err });
  const message = err instanceof Error ? err.message : String(err);
  // The server's HTTP answer: its status, judged as any upstream's (a 4xx is no provider fault).
  if (err instanceof StreamableHTTPError && err.code !== undefined && err.code >= 400) return new UpstreamError("http", `the MCP server failed: ${message}`, err.code, { cause: err });
  // A JSON-RPC error the server answered about the call itself (invalid params, no such method): asking again changes nothing.
  if (err instanceof McpError && [ErrorCode.InvalidParams, ErrorCode.MethodNotFound, ErrorCode.InvalidRequest].includes(err.code)) return new UpstreamError("http", `the MCP server failed: ${message}`, undefined, { cause: err });
  return new UpstreamError(err instanceof McpError ? "invalid_response" : "network", `the MCP server failed: ${message}`, undefined, { cause: err });
}

const settleWithin = (promise: Promise<unknown>, ms: number) => {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const waited = new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)));
  return Promise.race([promise.catch(() => {}), waited]).finally(() => clearTimeout(timer));
};

/** An open MCP session: its client, and the signal that ends it (its owner's, or an answer over maxBytes). */
interface McpSession {
  client: Client;
  signal: AbortSignal;
  /** The session id the server gave, if any (a stateless server gives none). */
  sessionId(): string | undefined;
  /** Ends a stateful server's session (DELETE, unless `terminate` is false), waiting for it only briefly, and closes the client. */
  close(terminate?: boolean): Promise<void>;
  /** Counts by `take` the answers to the requests sent with `params`, until the returned function is called (./mcp-answer-meters.ts). */
  meter(params: object, take: TakeBytes): () => void;
}

/**
 * Connects to a server over streamable HTTP (official SDK client). The
 * session lives until `lifetime` aborts or an answer exceeds `maxBytes`; the
 * handshake itself is bounded by `timeoutMs`.
 */
async function openSession(server: McpServerTarget, opts: { lifetime: AbortSignal; timeoutMs: number; maxBytes: number }): Promise<McpSession> {
  const session = new AbortController();
  const stop = (reason: unknown) => {
    if (!session.signal.aborted) session.abort(reason);
  };
  const follow = () => stop(opts.lifetime.reason);
  if (opts.lifetime.aborted) follow();
  else opts.lifetime.addEventListener("abort", follow, { once: true });
  // Our own validator: the SDK's default (Ajv) compiles code at run time, which workerd forbids.
  const client = new Client(CLIENT_INFO, { jsonSchemaValidator: mcpSchemaValidator });
  const meters = new AnswerMeters();
  const transport = new MeteredTransport(
    new URL(server.url),
    {
      requestInit: { headers: server.headers },
      // Per event on a stream: the server's notification stream may stay open as long as the session.
      // A call answered as an event stream that breaks off unanswered ends the session at once, not at the call's timeout.
      fetch: watchAnswers(throttledAnswers(heldAnswers(cappedFetch(opts.maxBytes, stop, { perSseEvent: true }), meters.takeFor)), stop),
    },
    meters,
  );
  const close = async (terminate = true) => {
    opts.lifetime.removeEventListener("abort", follow);
    // A stateless server has no session to end; closing the client aborts a DELETE still under way.
    if (terminate) await settleWithin(transport.terminateSession(), TERMINATE_WAIT_MS);
    await client.close().catch(() => {});
  };
  // The SDK bounds only the `initialize` request; its `notifications/initialized` POST has no timeout of its own.
  const handshake = setTimeout(() => stop(new UpstreamError("timeout", `the MCP server did not complete its handshake within ${opts.timeoutMs} ms`)), opts.timeoutMs);
  // The SDK keeps its abort listener on the signal a request was given after the answer: the session's own signal,
  // which aborts when the run ends, would then cancel the long-finished `initialize` (which MCP forbids).
  const handshakeSignal = new AbortController();
  const relay = () => handshakeSignal.abort(session.signal.reason);
  session.signal.addEventListener("abort", relay, { once: true });
  try {
    await untilAborted(client.connect(transport, { signal: handshakeSignal.signal, timeout: opts.timeoutMs + SDK_TIMEOUT_SLACK_MS }), session.signal);
    // A call's answer may come on any of the session's streams (the GET stream included): each is counted as it arrives.
    transport.meterArrivals();
  } catch (err) {
    await close();
    throw upstreamOf(err, session.signal);
  } finally {
    clearTimeout(handshake);
    session.signal.removeEventListener("abort", relay);
  }
  return { client, signal: session.signal, sessionId: () => transport.sessionId, close, meter: (params, take) => meters.register(params, take) };
}

/** A signal that aborts when either does, with that one's reason; `dispose` removes its listeners (`a` may live long). */
function eitherSignal(a: AbortSignal, b: AbortSignal): { signal: AbortSignal; dispose(): void } {
  const either = new AbortController();
  const fromA = () => either.abort(a.reason);
  const fromB = () => either.abort(b.reason);
  if (b.aborted) fromB();
  else if (a.aborted) fromA();
  else {
    a.addEventListener("abort", fromA, { once: true });
    b.addEventListener("abort", fromB, { once: true });
  }
  return {
    signal: either.signal,
    dispose() {
      a.removeEventListener("abort", fromA);
      b.removeEventListener("abort", fromB);
    },
  };
}

/** `promise`, or the signal's reason as soon as it aborts. */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  let stop!: () => void;
  const aborted = new Promise<never>((_, reject) => signal.addEventListener("abort", (stop = () => reject(signal.reason)), { once: true }));
  return Promise.race([promise, aborted]).finally(() => signal.removeEventListener("abort", stop));
}

/**
 * One short session: connect, do `work`, close (discovery). The SDK's
 * requests follow the caller's signal and the session's, which an answer
 * over `maxBytes` aborts, ending the wait for an answer that will not come.
 */
async function withSession<T>(server: McpServerTarget, opts: McpCallOptions, work: (client: Client, signal: AbortSignal) => Promise<T>): Promise<T> {
  const session = await openSession(server, { lifetime: opts.signal, timeoutMs: opts.timeoutMs, maxBytes: opts.maxBytes });
  try {
    return await work(session.client, session.signal);
  } catch (err) {
    throw upstreamOf(err, session.signal);
  } finally {
    await session.close();
  }
}

/** A listed tool the host does not register, and why. */
export interface SkippedMcpTool {
  name: string;
  reason: string;
}

/** Why a listed tool cannot be used: its name, or a schema the host could not enforce. */
function unusable(tool: { name: string; inputSchema: unknown; outputSchema?: unknown }): string | undefined {
  if (!MCP_TOOL_NAME.test(tool.name)) return "the name is not a valid MCP tool name (letters, digits, _ . -, at most 128)";
  for (const [which, schema] of [["input", tool.inputSchema], ["output", tool.outputSchema]] as const) {
    if (schema === undefined) continue;
    const problems = schemaProblems(schema as JsonSchema);
    if (problems.length) return `its ${which} schema cannot be enforced: ${problems.join("; ")}`;
  }
  return undefined;
}

/** Every tool the server lists (following pagination); the ones the host cannot use are reported, not registered. */
/** `unread`: the server had more pages than MAX_DISCOVERY_PAGES; the tools on them were not read (nor registered). */
export function discoverMcpTools(server: McpServerTarget, opts: McpCallOptions): Promise<{ tools: McpToolInfo[]; skipped: SkippedMcpTool[]; unread: boolean }> {
  return withSession(server, opts, async (client, signal) => {
    const tools: McpToolInfo[] = [];
    const skipped: SkippedMcpTool[] = [];
    const kept = new Set<string>();
    let cursor: string | undefined;
    for (let page = 0; page < MAX_DISCOVERY_PAGES; page++) {
      const listed = await client.listTools(cursor ? { cursor } : undefined, { signal, timeout: opts.timeoutMs + SDK_TIMEOUT_SLACK_MS });
      for (const t of listed.tools) {
        // A name listed twice (on one page or two) would be two tools of one name: the first is kept.
        const reason = kept.has(t.name) ? "listed more than once: the first listing is kept" : unusable(t);
        if (reason) skipped.push({ name: t.name, reason });
        else {
          kept.add(t.name);
          tools.push({ name: t.name, description: t.description ?? "", inputSchema: t.inputSchema as Record<string, unknown> });
        }
      }
      cursor = listed.nextCursor;
      if (!cursor) break;
    }
    return { tools, skipped, unread: cursor !== undefined };
  });
}

export interface McpToolResult {
  content: unknown[];
  structuredContent?: Record<string, unknown>;
  isError: boolean;
}

const toToolResult = (result: Awaited<ReturnType<Client["callTool"]>>): McpToolResult => ({
  content: Array.isArray(result.content) ? result.content : [],
  ...(result.structuredContent ? { structuredContent: result.structuredContent as Record<string, unknown> } : {}),
  isError: result.isError === true,
});

/** `take(bytes)`; its refusal also aborts `refusal` with it, so the call waiting for that answer ends with it. */
function refused(take: TakeBytes, bytes: number, refusal: AbortController): void {
  try {
    take(bytes);
  } catch (err) {
    refusal.abort(err);
    throw err;
  }
}

/** The server answered 404 to a request naming the run's session: it no longer knows it. */
class SessionGone extends Error {}

interface PoolEntry {
  key: string;
  server: string | undefined;
  /** False once superseded: its DELETE would send credentials the operator replaced. */
  terminate: boolean;
  opening: Promise<McpSession>;
  /** Calls using (or waiting for) the session: a retired session is closed once there are none. */
  inflight: number;
  retired: boolean;
  closed: boolean;
}

/**
 * A run's MCP sessions, one per server, opened on the first `tools/call` and
 * kept until the run ends (`closeAll`), so later calls skip the handshake.
 * A session that itself fails (its connection, an answer over the cap) is
 * retired, and closed once no call uses it; the next call opens another. A
 * call's own end (its timeout, its caller gone, an error the server answered)
 * leaves the session to the others.
 */
export class McpSessionPool {
  private readonly entries = new Map<string, PoolEntry>();
  private readonly closing = new Set<Promise<void>>();

  /** `lifetime`: the run's signal; every session ends with it. */
  constructor(private readonly lifetime: AbortSignal) {}

  /** `tools/call`. A tool-level failure (`isError`) is a result, for the model to read, not an exception. */
  async callTool(server: McpServerTarget, call: { name: string; arguments: Record<string, unknown> }, opts: McpCallOptions): Promise<McpToolResult> {
    try {
      return await this.callOnce(server, call, opts);
    } catch (err) {
      // MCP: a 404 to a request naming a session means the server no longer knows it (a restart, an expiry); the client
      // MUST start a new session. The server did not run the call, so it is made once more, on the new session.
      if (!(err instanceof SessionGone)) throw err;
      return await this.callOnce(server, call, opts, false);
    }
  }

  private async callOnce(server: McpServerTarget, call: { name: string; arguments: Record<string, unknown> }, opts: McpCallOptions, retryGone = true): Promise<McpToolResult> {
    const entry = this.entryFor(server, opts);
    entry.inflight++;
    try {
      const session = await untilAborted(entry.opening, opts.signal);
      // The host holding no more of this call's answer (its take refused) ends this call alone, with that refusal.
      const refusal = new AbortController();
      const params = { ...call };
      const take = opts.take;
      const unmeter = take ? session.meter(params, (bytes) => refused(take, bytes, refusal)) : () => {};
      const own = eitherSignal(opts.signal, refusal.signal);
      const linked = eitherSignal(session.signal, own.signal);
      try {
        return toToolResult(await session.client.callTool(params, undefined, { signal: linked.signal, timeout: opts.timeoutMs + SDK_TIMEOUT_SLACK_MS }));
      } catch (err) {
        // The SDK reports an aborted request as RequestTimeout, a lost connection as ConnectionClosed. A server that said
        // when to come back (throttledAnswers) answered too: its session is kept for that next call, as it is after
        // the host's own refusal of an answer.
        const answered =
          (err instanceof McpError && err.code !== ErrorCode.ConnectionClosed && err.code !== ErrorCode.RequestTimeout) || (err instanceof UpstreamError && err.retryAfterMs !== undefined);
        const callEnded = opts.signal.aborted || refusal.signal.aborted;
        if (session.signal.aborted || (!callEnded && !answered)) this.retire(entry);
        if (retryGone && !callEnded && err instanceof StreamableHTTPError && err.code === 404 && session.sessionId() !== undefined) throw new SessionGone();
        // The run's end and the call's deadline fire together; the call's reason says which.
        throw upstreamOf(err, opts.signal.aborted ? opts.signal : linked.signal);
      } finally {
        unmeter();
        linked.dispose();
        own.dispose();
      }
    } finally {
      entry.inflight--;
      if (entry.retired && entry.inflight === 0) this.close(entry);
    }
  }

  /** Retires every session and waits for their ends (bounded: a server that never answers its DELETE is not waited for long). */
  async closeAll(): Promise<void> {
    for (const entry of [...this.entries.values()]) this.retire(entry);
    while (this.closing.size) await Promise.all([...this.closing]);
  }

  private entryFor(server: McpServerTarget, opts: McpCallOptions): PoolEntry {
    // Headers are part of the key: a server re-registered with new credentials gets a new session.
    const key = JSON.stringify([server.url, server.headers]);
    const existing = this.entries.get(key);
    if (existing) return existing;
    // The server's credentials (or URL) were replaced (a PUT): its earlier session is left to expire, never ended with
    // a DELETE that would send the replaced credentials once more.
    for (const other of this.entries.values()) if (server.name !== undefined && other.server === server.name) this.retire(other, false);
    const opening = openSession(server, { lifetime: this.lifetime, timeoutMs: opts.timeoutMs, maxBytes: opts.maxBytes });
    const entry: PoolEntry = { key, server: server.name, terminate: true, opening, inflight: 0, retired: false, closed: false };
    this.entries.set(key, entry);
    entry.opening.catch(() => this.retire(entry));
    return entry;
  }

  private retire(entry: PoolEntry, terminate = true): void {
    if (this.entries.get(entry.key) === entry) this.entries.delete(entry.key);
    entry.retired = true;
    entry.terminate &&= terminate;
    if (entry.inflight === 0) this.close(entry);
  }

  private close(entry: PoolEntry): void {
    if (entry.closed) return;
    entry.closed = true;
    const closed: Promise<void> = entry.opening.then((s) => s.close(entry.terminate), () => {}).finally(() => this.closing.delete(closed));
    this.closing.add(closed);
  }
}
