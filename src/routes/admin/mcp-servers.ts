import * as z from "zod";
import { dbOf } from "../../db/connect";
import type { Db } from "../../db/client";
import { configOf, type Config } from "../../env";
import { badRequest, conflict, HostError, notFound } from "../../lib/errors";
import { parseJson } from "../../lib/json";
import { openValues, sealValues } from "../../lib/secret-box";
import { headOf } from "../../lib/text";
import { jsonBody, noBody, validate } from "../../middleware/validate";
import { EndpointSchema, HeadersSchema, ToolNameSchema } from "../../resources/ids";
import { discoverMcpTools, MAX_DISCOVERY_PAGES } from "../../resources/mcp";
import { maskUrl, redact, redactValue, secretFragments, urlSecrets } from "../../resources/secrets";
import { mcpToolName, toolsStore, toMcpServerView, type McpServerRow } from "../../resources/tools-store";
import { keptEndpoint, replacedHeaders } from "../../resources/replaced-secrets";
import { UpstreamError } from "../../resources/upstream";
import { router } from "../app-env";
import { refuseIfGranted } from "../../agents/grants-in-use";
import { insertUnique } from "./unique";
import { changedMeanwhile, checkReadAsStored, sameCreation } from "./replace";
import { nextUpdatedAt, updatedAtOf } from "../../lib/updated-at";
import { mcpServer } from "../../db/schema";
import { selectPage } from "../../stores/list-page";
import { AdminListQuery, listing } from "./list-page";
import { mcpServerSlot } from "../../stores/secret-slots";

const DISCOVERY_TIMEOUT_MS = 10_000;

/** An MCP server over streamable HTTP; its tools are discovered now and named `{name}.{tool}`. */
const McpServerInput = z.strictObject({
  name: ToolNameSchema,
  url: EndpointSchema,
  headers: HeadersSchema.optional(),
});

/**
 * PUT takes the body of POST, or what GET answered sent back as it is: its view-only fields are ignored (`name` must be
 * the path's), but for `updated_at`, which, when sent, must still be the stored one (checkReadAsStored).
 */
const McpServerReplace = McpServerInput.extend({
  name: z.string().optional(),
  tools: z.array(z.string()).optional(),
  discovered_at: z.string().optional(),
  created_at: z.string().optional(),
  updated_at: z.string().optional(),
});

/** `updatedAt`: a replaced server's new one; a refreshed one's as read (a refresh changes nothing the operator set); unused for a new one. */
type ServerToSave = { name: string; url: string; headers: Record<string, string>; headersJson: string; updatedAt: number | null };

/**
 * List the server's tools and store them with it (replacing the earlier list), `headersJson` the headers as stored.
 * 502 when the server cannot be listed; 409 when creating a server that exists meanwhile, or saving over one into
 * dropping a tool an agent grants. `existing`: the row as read, the only one a refresh or PUT writes over.
 */
async function discoverAndSave(db: Db, config: Config, server: ServerToSave, existing: McpServerRow | null) {
  const secrets = secretFragments([...Object.values(server.headers), ...urlSecrets(server.url)]);
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new UpstreamError("network", `no answer within ${DISCOVERY_TIMEOUT_MS} ms`)), DISCOVERY_TIMEOUT_MS);
  let discovered;
  try {
    discovered = await discoverMcpTools(server, { signal: controller.signal, timeoutMs: DISCOVERY_TIMEOUT_MS, maxBytes: config.RESOURCE_RESPONSE_MAX_BYTES });
  } catch (err) {
    // A malformed answer is said to be that (upstreamOf in resources/mcp.ts), not dumped as the client's schema issues.
    const raw = err instanceof Error ? err.message : String(err);
    // Words the server answered with, cut before its credentials were known, end with a secret's start left out.
    const cutShort = err instanceof UpstreamError && err.cutShort;
    const message = `${headOf(redact(raw, secrets, { tail: cutShort }), 500)}${cutShort ? "…" : ""}`;
    throw new HostError(502, "bad_gateway", `could not list the tools of MCP server ${maskUrl(server.url)}: ${message}`);
  } finally {
    clearTimeout(timer);
  }
  const now = Date.now();
  const store = toolsStore(db);
  // What the server says of its tools is shown to runs and operators: scrubbed of the credential it was called with.
  const tools = discovered.tools.map((t) => ({
    toolName: mcpToolName(server.name, t.name),
    description: redact(t.description, secrets),
    parametersJson: JSON.stringify(redactValue(t.inputSchema, secrets)),
    mcpServer: server.name,
    mcpToolName: t.name,
    createdAt: now,
    updatedAt: now,
  }));
  if (existing) {
    // As deleting a granted tool is refused, so is a refresh that would drop one: the grant would name nothing.
    const listed = new Set(tools.map((t) => t.toolName));
    await refuseIfGranted(db, "tools", `a tool MCP server ${server.name} no longer lists`, `${server.name}.`, (id) => id.startsWith(`${server.name}.`) && !listed.has(id));
  }
  // Its created_at is its identity (PROTOCOL §4): kept, so runs granted its tools keep them across a refresh or PUT.
  const saved = { name: server.name, url: server.url, headersJson: server.headersJson, discoveredAt: now, createdAt: existing?.createdAt ?? now, updatedAt: existing ? server.updatedAt : now };
  // Created only if still absent: of two concurrent creates one wins, the other is a 409 (never an overwrite).
  if (existing) {
    // Deleted, replaced or changed while its tools were listed: never brought back, nor written over (a rotated key restored).
    if (!(await store.refreshServer(saved, tools, existing))) {
      const current = await store.getServer(server.name);
      // One registered anew under its name meanwhile is another server: this write was for the one deleted.
      if (sameCreation(current, existing)) throw changedMeanwhile(`MCP server ${server.name} was replaced or changed while its tools were listed: nothing was saved`, updatedAtOf(current));
      throw notFound(`MCP server ${server.name} was deleted while its tools were listed: nothing was saved`);
    }
  } else await insertUnique(() => store.createServer(saved, tools), `MCP server ${server.name}`);
  const row = (await store.getServer(server.name))!;
  // Past the page bound the rest is unread: said, so the operator knows tools are missing.
  return { ...toMcpServerView(row, await store.toolsOf(server.name)), skipped_tools: discovered.skipped, ...(discovered.unread ? { unread_tools: `the server listed more than ${MAX_DISCOVERY_PAGES} pages of tools; those after them were not read` } : {}) };
}

export const mcpServersRouter = router()
  .get("/", validate("query", AdminListQuery), (c) => {
    const db = dbOf(c.env);
    return listing(c, c.req.valid("query"), {
      kind: "mcp-servers",
      read: (page) => selectPage(db, mcpServer, { id: mcpServer.name }, page),
      position: (row) => ({ time: 0, id: row.name }),
      view: (rows) => Promise.all(rows.map(async (s) => toMcpServerView(s, await toolsStore(db).toolsOf(s.name)))),
    });
  })
  .post("/", jsonBody(McpServerInput, { exact: true }), async (c) => {
    const input = c.get("body");
    const db = dbOf(c.env);
    if (await toolsStore(db).getServer(input.name)) throw conflict(`MCP server ${input.name} already exists`);
    const headers = input.headers ?? {};
    const headersJson = JSON.stringify(await sealValues(db.secrets, headers, mcpServerSlot(input)));
    return c.json(await discoverAndSave(db, configOf(c.env), { name: input.name, url: input.url, headers, headersJson, updatedAt: null }, null), 201);
  })
  .get("/:name", async (c) => {
    const store = toolsStore(dbOf(c.env));
    const row = await store.getServer(c.req.param("name"));
    if (!row) throw notFound(`MCP server ${c.req.param("name")} not found`);
    return c.json(toMcpServerView(row, await store.toolsOf(row.name)));
  })
  .post("/:name/refresh", noBody(), async (c) => {
    const db = dbOf(c.env);
    const row = await toolsStore(db).getServer(c.req.param("name"));
    if (!row) throw notFound(`MCP server ${c.req.param("name")} not found`);
    const headers = await openValues(db.secrets, parseJson<Record<string, string>>(row.headersJson, {}), mcpServerSlot(row));
    // Written back as stored: a refresh seals nothing anew.
    return c.json(await discoverAndSave(db, configOf(c.env), { name: row.name, url: row.url, headers, headersJson: row.headersJson, updatedAt: row.updatedAt }, row));
  })
  // New credentials or a new address: its tools are listed with them before anything is saved (a 502 saves nothing).
  .put("/:name", jsonBody(McpServerReplace, { exact: true }), async (c) => {
    const db = dbOf(c.env);
    const input = c.get("body");
    const row = await toolsStore(db).getServer(c.req.param("name"));
    if (!row) throw notFound(`MCP server ${c.req.param("name")} not found`);
    if (input.name !== undefined && input.name !== row.name) throw badRequest(`name ${input.name} is not the MCP server at this path (${row.name})`);
    // Before its tools are listed: a stale copy costs the server no call.
    checkReadAsStored(input.updated_at, updatedAtOf(row), `MCP server ${row.name}`);
    const to = { name: row.name, url: keptEndpoint(input.url, row.url) };
    const headersJson = await replacedHeaders(db.secrets, input.headers, row.headersJson, mcpServerSlot(row), mcpServerSlot(to));
    const headers = await openValues(db.secrets, parseJson<Record<string, string>>(headersJson, {}), mcpServerSlot(to));
    return c.json(await discoverAndSave(db, configOf(c.env), { ...to, headers, headersJson, updatedAt: nextUpdatedAt(updatedAtOf(row)) }, row));
  })
  .delete("/:name", async (c) => {
    const store = toolsStore(dbOf(c.env));
    const name = c.req.param("name");
    if (!(await store.getServer(name))) throw notFound(`MCP server ${name} not found`);
    await refuseIfGranted(dbOf(c.env), "tools", `a tool of MCP server ${name}`, `${name}.`, (id) => id.startsWith(`${name}.`));
    await store.removeServer(name);
    return c.body(null, 204);
  });
