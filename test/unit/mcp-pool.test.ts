import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { discoverMcpTools, McpSessionPool } from "../../src/resources/mcp";
import { startFakeMcpServer } from "../support/fake-mcp";

/** The pool against a real MCP server (the official SDK's) on loopback. */
const TOKEN = "pool-token-3b7e";
let server: Awaited<ReturnType<typeof startFakeMcpServer>>;

beforeAll(async () => {
  server = await startFakeMcpServer({ token: TOKEN, sessionId: "pooled-1", slowMs: 300, hugeBytes: 64 * 1024 });
});
afterAll(() => server?.close());

const target = () => ({ url: server.url, headers: { authorization: `Bearer ${TOKEN}` } });
const options = (signal = new AbortController().signal) => ({ signal, timeoutMs: 5_000, maxBytes: 16 * 1024 });
const count = (method: string, from: number) => server.calls.slice(from).filter((c) => c.method === method).length;

describe("McpSessionPool", () => {
  it("opens one session for the calls of a run and ends it when the run does", async () => {
    const from = server.calls.length;
    const pool = new McpSessionPool(new AbortController().signal);
    const [a, b] = await Promise.all([pool.callTool(target(), { name: "add", arguments: { a: 1, b: 2 } }, options()), pool.callTool(target(), { name: "shout", arguments: { text: "x" } }, options())]);
    await pool.callTool(target(), { name: "add", arguments: { a: 2, b: 2 } }, options());
    expect(a.structuredContent).toEqual({ sum: 3 });
    expect(b.content).toEqual([{ type: "text", text: "X" }]);
    expect([count("initialize", from), count("tools/call", from), count("DELETE", from)]).toEqual([1, 3, 0]);
    await pool.closeAll();
    expect(count("DELETE", from)).toBe(1);
  });

  it("leaves the session to the others when one call ends on its own signal", async () => {
    const from = server.calls.length;
    const pool = new McpSessionPool(new AbortController().signal);
    const impatient = new AbortController();
    const slow = pool.callTool(target(), { name: "slow", arguments: {} }, options());
    const abandoned = pool.callTool(target(), { name: "slow", arguments: {} }, options(impatient.signal));
    setTimeout(() => impatient.abort(new Error("the caller's own deadline")), 50);
    await expect(abandoned).rejects.toThrow("the caller's own deadline");
    expect((await slow).content).toEqual([{ type: "text", text: "slow" }]);
    await pool.callTool(target(), { name: "add", arguments: { a: 0, b: 1 } }, options());
    expect(count("initialize", from)).toBe(1);
    await pool.closeAll();
  });

  it("retires a session whose answer was over the cap: the next call opens another", async () => {
    const from = server.calls.length;
    const pool = new McpSessionPool(new AbortController().signal);
    await expect(pool.callTool(target(), { name: "huge", arguments: {} }, options())).rejects.toThrow(/larger than 16384 bytes/);
    expect((await pool.callTool(target(), { name: "add", arguments: { a: 1, b: 1 } }, options())).structuredContent).toEqual({ sum: 2 });
    expect(count("initialize", from)).toBe(2);
    await pool.closeAll();
    // Both sessions were ended: the retired one once its call was over, the other at the end.
    expect(count("DELETE", from)).toBe(2);
  });

  it("ends with its run: a call after the run's end fails at once", async () => {
    const run = new AbortController();
    const pool = new McpSessionPool(run.signal);
    await pool.callTool(target(), { name: "add", arguments: { a: 1, b: 1 } }, options());
    run.abort(new Error("the run has ended"));
    await expect(pool.callTool(target(), { name: "add", arguments: { a: 1, b: 1 } }, options())).rejects.toThrow("the run has ended");
    await pool.closeAll();
  });
});

describe("an MCP server whose handshake never completes", () => {
  let stalled: Awaited<ReturnType<typeof startFakeMcpServer>>;
  beforeAll(async () => {
    stalled = await startFakeMcpServer({ token: TOKEN, hangOnInitialized: true });
  });
  afterAll(() => stalled?.close());
  const at = () => ({ url: stalled.url, headers: { authorization: `Bearer ${TOKEN}` } });
  /** `promise`'s outcome, or "pending" once `ms` passed. */
  const within = (promise: Promise<unknown>, ms: number) =>
    Promise.race([promise.then(() => "resolved", (e: Error) => `rejected: ${e.message}`), new Promise((r) => setTimeout(r, ms, "pending"))]);

  it("ends discovery at its timeout", async () => {
    const outcome = await within(discoverMcpTools(at(), { signal: AbortSignal.timeout(500), timeoutMs: 500, maxBytes: 64 * 1024 }), 4_000);
    expect(outcome).toMatch(/^rejected: /);
  });

  it("lets a run's pool close once the run has ended", async () => {
    const run = new AbortController();
    const pool = new McpSessionPool(run.signal);
    await expect(pool.callTool(at(), { name: "add", arguments: { a: 1, b: 2 } }, { signal: AbortSignal.timeout(300), timeoutMs: 300, maxBytes: 64 * 1024 })).rejects.toThrow();
    run.abort(new Error("the run has ended"));
    expect(await within(pool.closeAll(), 4_000)).toBe("resolved");
  });
});

