import { and, eq, inArray, notInArray, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { mcpServer, tool } from "../db/schema";
import { insertWhere } from "../db/guarded";
import { unchanged } from "../db/unchanged";
import { iso, parseJson } from "../lib/json";
import { updatedAtOf } from "../lib/updated-at";
import { maskHeaders, maskUrl } from "./secrets";

export type ToolRow = typeof tool.$inferSelect;
export type McpServerRow = typeof mcpServer.$inferSelect;

/** Admin view: header values, and what may be a credential in the endpoint, are never shown. */
export function toToolView(row: ToolRow) {
  return {
    name: row.toolName,
    description: row.description,
    parameters: parseJson<Record<string, unknown>>(row.parametersJson, {}),
    source: row.mcpServer ? ("mcp" as const) : ("http" as const),
    endpoint: row.endpoint ? maskUrl(row.endpoint) : undefined,
    headers: row.headersJson ? maskHeaders(parseJson<Record<string, string>>(row.headersJson, {})) : undefined,
    mcp_server: row.mcpServer ?? undefined,
    created_at: iso(row.createdAt),
    updated_at: iso(updatedAtOf(row)),
  };
}

export function toMcpServerView(row: McpServerRow, tools: ToolRow[]) {
  return {
    name: row.name,
    url: maskUrl(row.url),
    headers: maskHeaders(parseJson<Record<string, string>>(row.headersJson, {})),
    tools: tools.map((t) => t.toolName),
    discovered_at: iso(row.discoveredAt),
    created_at: iso(row.createdAt),
    updated_at: iso(updatedAtOf(row)),
  };
}

/**
 * `createdAt`: which tool of this name it is (one deleted and registered anew is another); for an MCP tool its server's,
 * as its own row is written anew by each refresh.
 */
const descriptorColumns = {
  toolName: tool.toolName,
  description: tool.description,
  parametersJson: tool.parametersJson,
  createdAt: sql<number>`coalesce(${mcpServer.createdAt}, ${tool.createdAt})`.mapWith(Number),
};
export type ToolDescriptor = { toolName: string; description: string; parametersJson: string; createdAt: number };

/** An MCP tool's full name `{server}.{tool}`. */
export const mcpToolName = (server: string, name: string) => `${server}.${name}`;

export function toolsStore(db: Db) {
  return {
    /** With its secret headers: only for the host's own call. */
    get: (toolName: string) => db.select().from(tool).where(eq(tool.toolName, toolName)).get(),
    create: (row: typeof tool.$inferInsert) => db.insert(tool).values(row).run(),
    remove: (toolName: string) => db.delete(tool).where(eq(tool.toolName, toolName)).run(),
    /** The tool as `row`, only if it is still `read`: false when it was deleted or changed meanwhile. */
    async replace(row: ToolRow, read: ToolRow): Promise<boolean> {
      const { toolName, ...rest } = row;
      return (await db.update(tool).set(rest).where(unchanged(tool, read)).returning({ toolName: tool.toolName })).length === 1;
    },
    descriptors: (names: string[]) => db.select(descriptorColumns).from(tool).leftJoin(mcpServer, eq(tool.mcpServer, mcpServer.name)).where(inArray(tool.toolName, names)),

    getServer: (name: string) => db.select().from(mcpServer).where(eq(mcpServer.name, name)).get(),
    toolsOf: (server: string) => db.select().from(tool).where(eq(tool.mcpServer, server)).orderBy(tool.toolName).all(),

    /** A new server and its tools, one batch: fails (a constraint violation) when the server exists. */
    async createServer(server: typeof mcpServer.$inferInsert, tools: (typeof tool.$inferInsert)[]) {
      await db.batch([db.insert(mcpServer).values(server), ...tools.map((t) => db.insert(tool).values(t))]);
    },
    /**
     * Save a refreshed (or replaced) server and replace its discovered tools, one batch, only if it is still the
     * server that was read (`read`: not deleted, replaced by another of its name, nor changed by a PUT or another
     * refresh while its tools were listed). False when it was not. The server's row is written last, so every
     * statement before it checks the row as read. Tools still listed are updated in place, only the others
     * deleted: the database refuses to delete one an agent grants (migration 0010).
     */
    async refreshServer(server: typeof mcpServer.$inferInsert, tools: (typeof tool.$inferInsert)[], read: McpServerRow): Promise<boolean> {
      const { name, ...rest } = server;
      const same = unchanged(mcpServer, read);
      const stillThere = sql`EXISTS (SELECT 1 FROM ${mcpServer} WHERE ${same})`;
      const results = await db.batch([
        db.delete(tool).where(and(eq(tool.mcpServer, name), notInArray(tool.toolName, tools.map((t) => t.toolName)), stillThere)),
        ...tools.flatMap(({ toolName, ...fields }) => {
          const ours = and(eq(tool.toolName, toolName), eq(tool.mcpServer, name));
          return [db.update(tool).set(fields).where(and(ours, stillThere)), insertWhere(db, tool, { toolName, ...fields }, sql`NOT EXISTS (SELECT 1 FROM ${tool} WHERE ${ours}) AND ${stillThere}`)];
        }),
        db.update(mcpServer).set(rest).where(same).returning({ name: mcpServer.name }),
      ]);
      return (results.at(-1) as unknown[]).length > 0;
    },
    async removeServer(name: string) {
      await db.batch([db.delete(tool).where(eq(tool.mcpServer, name)), db.delete(mcpServer).where(eq(mcpServer.name, name))]);
    },
  };
}

