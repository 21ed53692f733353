import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listenLoopback, readBody } from "../support/http-server";
import { startTestHost, type TestHost } from "../support/host";
import { startAdHocRunner } from "../support/runner";

/**
 * Discovery of an MCP server's tools meets a server that lists a name twice
 * (bad upstream input: one tool is kept, the repeat reported), and an
 * operator who deletes the server while a refresh is listing its tools (the
 * refresh must not bring it back).
 */
let host: TestHost;
let upstream: Awaited<ReturnType<typeof listenLoopback>>;
const listed: Record<string, { name: string; inputSchema: unknown }[]> = {};
const slow = new Set<string>();

beforeAll(async () => {
  upstream = await listenLoopback(async (req, res) => {
    const raw = await readBody(req);
    const body = raw ? JSON.parse(raw) : null;
    if (req.method !== "POST") {
      res.writeHead(405);
      return void res.end();
    }
    if (body.id === undefined) {
      res.writeHead(202);
      return void res.end();
    }
    const server = (req.url ?? "").split("/").pop()!;
    const reply = (result: unknown) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ jsonrpc: "2.0", id: body.id, result }));
    };
    if (body.method === "initialize") return reply({ protocolVersion: body.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: server, version: "1" } });
    if (body.method === "tools/list") {
      if (slow.has(server)) await new Promise((r) => setTimeout(r, 1500));
      return reply({ tools: listed[server] ?? [] });
    }
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ jsonrpc: "2.0", id: body.id, error: { code: -32601, message: "no" } }));
  });
  host = await startTestHost();
});
afterAll(async () => {
  await host?.dispose();
  await upstream?.close();
});

const tool = (name: string, description = "") => ({ name, description, inputSchema: { type: "object" } });

describe("an MCP server listing one tool name twice", () => {
  it("is registered with the first listing, the repeat reported in skipped_tools", async () => {
    listed.fresh = [tool("lookup", "first"), tool("other"), tool("lookup", "second")];
    const res = await host.admin("POST", "/v1/admin/mcp-servers", { name: "fresh", url: `${upstream.url}/mcp/fresh` });
    expect(res.status).toBe(201);
    expect(res.body.tools).toEqual(["fresh.lookup", "fresh.other"]);
    expect(res.body.skipped_tools).toEqual([{ name: "lookup", reason: expect.stringMatching(/more than once/) }]);
    expect((await host.admin("GET", "/v1/admin/tools/fresh.lookup")).body.description).toBe("first");
  });

  it("is refreshed the same way, never a 500", async () => {
    listed.known = [tool("lookup")];
    expect((await host.admin("POST", "/v1/admin/mcp-servers", { name: "known", url: `${upstream.url}/mcp/known` })).status).toBe(201);
    listed.known = [tool("lookup"), tool("lookup")];
    const res = await host.admin("POST", "/v1/admin/mcp-servers/known/refresh");
    expect([res.status, res.body.tools, res.body.skipped_tools?.length]).toEqual([200, ["known.lookup"], 1]);
  });
});

describe("an MCP server whose tool an agent grants", () => {
  it("is refreshed with that tool kept in place, and refused (409) when the tool is no longer listed", async () => {
    const svc = await startAdHocRunner({ name: "mcp-grants", onRun: () => undefined });
    try {
      expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: svc.url })).status).toBe(201);
      listed.granted = [tool("lookup", "v1")];
      expect((await host.admin("POST", "/v1/admin/mcp-servers", { name: "granted", url: `${upstream.url}/mcp/granted` })).status).toBe(201);
      const agent = { agent_id: "mcp-user", name: "u", runner_id: svc.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: "mcp-user" }, resource_policy: { tools: ["granted.lookup"] } };
      expect((await host.admin("POST", "/v1/admin/agents", agent)).status).toBe(201);

      listed.granted = [tool("lookup", "v2"), tool("extra")];
      const refreshed = await host.admin("POST", "/v1/admin/mcp-servers/granted/refresh");
      expect([refreshed.status, refreshed.body.tools]).toEqual([200, ["granted.extra", "granted.lookup"]]);
      expect((await host.admin("GET", "/v1/admin/tools/granted.lookup")).body.description).toBe("v2");

      listed.granted = [tool("extra")];
      expect((await host.admin("POST", "/v1/admin/mcp-servers/granted/refresh")).status).toBe(409);
      expect((await host.admin("GET", "/v1/admin/mcp-servers/granted")).body.tools).toEqual(["granted.extra", "granted.lookup"]);
    } finally {
      await svc.close();
    }
  });
});

describe("an MCP server deleted while it is being refreshed", () => {
  it("stays deleted, its tools and credentials with it", async () => {
    listed.gw = [tool("lookup")];
    const created = await host.admin("POST", "/v1/admin/mcp-servers", { name: "gw", url: `${upstream.url}/mcp/gw`, headers: { authorization: "Bearer mcp-token-5b7c9d1e3f" } });
    expect(created.status).toBe(201);
    slow.add("gw");
    const refreshing = host.admin("POST", "/v1/admin/mcp-servers/gw/refresh");
    await new Promise((r) => setTimeout(r, 500));
    expect((await host.admin("DELETE", "/v1/admin/mcp-servers/gw")).status).toBe(204);
    const refreshed = await refreshing;
    const after = { refresh: refreshed.status, server: (await host.admin("GET", "/v1/admin/mcp-servers/gw")).status, tool: (await host.admin("GET", "/v1/admin/tools/gw.lookup")).status };
    expect(after).toEqual({ refresh: 404, server: 404, tool: 404 });
    expect(await host.query("SELECT name FROM mcp_server WHERE name = 'gw'")).toEqual([]);
  });

  it("and created again meanwhile keeps the new one: the stale refresh overwrites nothing and is a 404 (the server it read is gone)", async () => {
    listed.again = [tool("old")];
    expect((await host.admin("POST", "/v1/admin/mcp-servers", { name: "again", url: `${upstream.url}/mcp/again` })).status).toBe(201);
    slow.add("again");
    const refreshing = host.admin("POST", "/v1/admin/mcp-servers/again/refresh");
    await new Promise((r) => setTimeout(r, 500));
    expect((await host.admin("DELETE", "/v1/admin/mcp-servers/again")).status).toBe(204);
    slow.delete("again");
    listed.again = [tool("new")];
    // Another URL (a second version of the server), listing another tool.
    expect((await host.admin("POST", "/v1/admin/mcp-servers", { name: "again", url: `${upstream.url}/mcp/v2/again` })).status).toBe(201);
    expect((await refreshing).status).toBe(404);
    const server = (await host.admin("GET", "/v1/admin/mcp-servers/again")).body;
    expect([server.url, server.tools]).toEqual([`${upstream.url}/mcp/v2/again`, ["again.new"]]);
  });
});

describe("an MCP server whose tools/list answer is not MCP's", () => {
  it("is a 502 saying so, not the client's schema dump", async () => {
    listed.garbled = "not a list" as unknown as (typeof listed)[string];
    const res = await host.admin("POST", "/v1/admin/mcp-servers", { name: "garbled", url: `${upstream.url}/mcp/garbled` });
    expect([res.status, res.body.error?.code, res.body.error?.message]).toEqual([502, "bad_gateway", `could not list the tools of MCP server ${upstream.url}/mcp/garbled: the MCP server's answer is not a valid MCP response`]);
  });
});
