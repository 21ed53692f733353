import type { ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { listenLoopback, readBody, sendJson } from "../support/http-server";
import { startTestHost, type TestHost } from "../support/host";
import { runLedger, startScriptedRunner } from "../support/scripted-runner";

/**
 * An MCP answer counts against RESOURCE_RESPONSE_BUDGET_BYTES wherever the server sends it. The SDK client takes an
 * answer from any stream of the session: its request's own POST, or the GET stream the client opens after the
 * handshake (where MCP puts a resumed answer). Only the POST's body was counted, so a server answering its
 * `tools/call` POST with 202 and the answer on the GET stream had its answers held uncounted, past the budget.
 */
const BUDGET = 64 * 1024;
/** The HTTP tool `holder` sends this much and waits; an MCP answer as large then crosses the budget. */
const HALF = 40 * 1024;
/** The HTTP tool `probe` answers this much: refused once `holder`'s part is counted. */
const PROBE = 30 * 1024;

let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
let up: Awaited<ReturnType<typeof listenLoopback>>;
const releaseHolder = deferred<void>();
/** `holder`'s part has left the server: probing before it could take the budget first and get `holder` refused. */
const holderSent = deferred<void>();
/** The GET streams the client has open (discovery's closes; the run's session opens its own). */
const getStreams = new Set<ServerResponse>();
let getOpened = deferred<void>();

/** A raw MCP server whose tool `ongets` answers on the GET stream, its POST only accepted (202). */
async function mcpServer(raw: string, res: ServerResponse): Promise<void> {
  const msg = JSON.parse(raw);
  if (msg.id === undefined) return void res.writeHead(202).end();
  if (msg.method === "initialize") {
    return sendJson(res, 200, { jsonrpc: "2.0", id: msg.id, result: { protocolVersion: msg.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: "g", version: "1" } } });
  }
  if (msg.method === "tools/list") return sendJson(res, 200, { jsonrpc: "2.0", id: msg.id, result: { tools: [{ name: "ongets", inputSchema: { type: "object" } }] } });
  res.writeHead(202).end();
  // The client opens its GET stream once the handshake is done, without waiting for it: it may not be open yet.
  while (!getStreams.size) await getOpened.promise;
  const answer = { jsonrpc: "2.0", id: msg.id, result: { content: [{ type: "text", text: "x".repeat(HALF) }] } };
  for (const stream of getStreams) stream.write(`event: message\ndata: ${JSON.stringify(answer)}\n\n`);
}

beforeAll(async () => {
  up = await listenLoopback(async (req, res) => {
    const sent = await readBody(req);
    if (req.url === "/mcp" && req.method === "GET") {
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      res.write(": open\n\n");
      getStreams.add(res);
      res.on("close", () => getStreams.delete(res));
      getOpened.resolve();
      getOpened = deferred<void>();
      return;
    }
    if (req.url === "/mcp") return req.method === "POST" ? mcpServer(sent, res) : void res.writeHead(405).end();
    res.writeHead(200, { "content-type": "application/json" });
    if (req.url === "/probe") return void res.end(`{"blob":"${"p".repeat(PROBE)}"}`);
    res.write(`{"blob":"${"h".repeat(HALF)}`, () => holderSent.resolve());
    await releaseHolder.promise;
    res.end('"}');
  });
  runner = await startScriptedRunner({ name: "mcp-routes", runners: [{ name: "default", label: { en_US: "g" }, permissions: { tools: ["call"] } }] });
  host = await startTestHost({ vars: { RESOURCE_RESPONSE_MAX_BYTES: String(BUDGET), RESOURCE_RESPONSE_BUDGET_BYTES: String(BUDGET) } });
  for (const name of ["holder", "probe"]) expect((await host.admin("POST", "/v1/admin/tools", { name, endpoint: `${up.url}/${name}` })).status).toBe(201);
  expect((await host.admin("POST", "/v1/admin/mcp-servers", { name: "g", url: `${up.url}/mcp` })).status).toBe(201);
  await runner.register(host);
  const agent = await host.admin("POST", "/v1/admin/agents", {
    agent_id: "routes", name: "g", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "global" }, resource_policy: { tools: ["holder", "probe", "g.ongets"] },
  });
  expect(agent.status).toBe(201);
});
afterAll(async () => {
  releaseHolder.resolve();
  for (const stream of getStreams) stream.end();
  await host?.dispose();
  await Promise.all([runner?.close(), up?.close()]);
});

describe("an MCP answer sent on the session's GET stream", () => {
  it("counts against its call: beside an answer holding most of the budget, it is refused 429 and recorded so", async () => {
    const { result, runId } = await runner.run(host, "mcp-on-get", async (api) => {
      const holder = api("tool.call", { tool_name: "holder", parameters: {} });
      await holderSent.promise;
      // Until `holder`'s part is counted, a probe goes through; from then on it is refused at once.
      let probe = await api("tool.call", { tool_name: "probe", parameters: {} });
      for (const until = Date.now() + 5_000; probe.status === 200 && Date.now() < until; ) probe = await api("tool.call", { tool_name: "probe", parameters: {} });
      const onGet = await api("tool.call", { tool_name: "g.ongets", parameters: {} });
      releaseHolder.resolve();
      return { probe: probe.status, onGet: [onGet.status, onGet.body.error?.code ?? onGet.body.data?.result?.content?.[0]?.text?.length], holder: (await holder).status };
    });
    expect(result.probe).toBe(429);
    expect(result.onGet).toEqual([429, "rate_limited"]);
    expect(result.holder).toBe(200);
    const completed = (await runLedger(host, runId)).filter((e) => e.type === "tool.call.completed" && e.data.tool_name === "g.ongets").map((e) => e.data.error?.code ?? "ok");
    expect(completed).toEqual(["rate_limited"]);
  });
});
