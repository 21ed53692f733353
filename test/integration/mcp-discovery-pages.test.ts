import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listenLoopback, readBody, sendJson } from "../support/http-server";
import { startTestHost, type TestHost } from "../support/host";

/**
 * Discovery reads at most 20 pages of an MCP server's tools/list (one tool per page here): a server with more is
 * registered with the tools of those pages, and the answer says the rest were not read (`unread_tools`).
 */

let PAGES = 25;
let host: TestHost;
let mcp: Awaited<ReturnType<typeof listenLoopback>>;

beforeAll(async () => {
  mcp = await listenLoopback(async (req, res) => {
    if (req.method !== "POST") {
      res.writeHead(405);
      return void res.end();
    }
    const msg = JSON.parse(await readBody(req));
    if (msg.id === undefined) {
      res.writeHead(202);
      return void res.end();
    }
    if (msg.method === "initialize") {
      return sendJson(res, 200, { jsonrpc: "2.0", id: msg.id, result: { protocolVersion: msg.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: "big", version: "1" } } });
    }
    const page = Number(msg.params?.cursor ?? 0);
    const result = { tools: [{ name: `tool_${page}`, inputSchema: { type: "object" } }], ...(page + 1 < PAGES ? { nextCursor: String(page + 1) } : {}) };
    sendJson(res, 200, { jsonrpc: "2.0", id: msg.id, result });
  });
  host = await startTestHost({});
});
afterAll(async () => {
  await host?.dispose();
  await mcp?.close();
});

describe("an MCP server whose tool list has more pages than the host reads", () => {
  it("has the tools of the pages read registered, and the answer says the rest were not read", async () => {
    PAGES = 25;
    const created = await host.admin("POST", "/v1/admin/mcp-servers", { name: "big", url: `${mcp.url}/mcp` });
    expect(created.status).toBe(201);
    expect(created.body.tools).toHaveLength(20);
    expect(created.body.unread_tools).toMatch(/more than 20 pages of tools/);
  });

  it("says nothing is unread when the last page was read", async () => {
    PAGES = 20;
    const created = await host.admin("POST", "/v1/admin/mcp-servers", { name: "whole", url: `${mcp.url}/mcp` });
    expect([created.status, created.body.tools.length, created.body.unread_tools]).toEqual([201, 20, undefined]);
  });
});
