import { and, eq, isNull, sql, type SQL } from "drizzle-orm";
import type { SQLiteColumn, SQLiteTable } from "drizzle-orm/sqlite-core";
import { batchAll, type Db } from "../db/client";
import { agent, bot, knowledgeBase, mcpServer, model, runner, runnerService, tool } from "../db/schema";
import { parseJson } from "../lib/json";
import { isSealed, resealValues, type SealedTable, type SecretBox, type SecretSlot } from "../lib/secret-box";
import { secretFieldNames } from "../agents/runner-config";
import type { AgentRunnerManifest } from "../protocol/manifest";
import { runnerServiceAt } from "./registry";
import { agentConfigSlot, botSlot, knowledgeBaseSlot, mcpServerSlot, modelSlot, runnerServiceSlot, toolSlot } from "./secret-slots";

/**
 * `secretFields`: in a record only these (and values already sealed) are credentials; absent, every value is.
 * `slotAsRead`: the row (and what it sends to) still holds what its slot was built from, so a value is never resealed
 * for an address a move changed meanwhile.
 */
type Row = { id: string; stored: string | null; slot: Omit<SecretSlot, "name">; slotAsRead: SQL | undefined; secretFields?: ReadonlySet<string> };

/** The column still holds `value` as read (null included). */
const still = (column: SQLiteColumn, value: string | null) => (value === null ? isNull(column) : eq(column, value));

/**
 * Each agent's runner_config with the fields its runner declares secret now, sealed for that runner at its service's
 * address. Of thousands of agents and hundreds of runners, only the columns that takes are read: not the agents'
 * policies, nor whole manifests (up to 1 MiB each), only their config_schema.
 */
async function agentConfigRows(db: Db): Promise<Row[]> {
  const services = new Map((await db.select({ serviceId: runnerService.serviceId, baseUrl: runnerService.baseUrl }).from(runnerService).all()).map((s) => [s.serviceId, s.baseUrl]));
  const schemas = await db.select({ runnerId: runner.runnerId, serviceId: runner.serviceId, schema: sql<string | null>`json_extract(${runner.manifestJson}, '$.config_schema')` }).from(runner).all();
  const runners = new Map(
    schemas.map((r) => [r.runnerId, { baseUrl: services.get(r.serviceId) ?? "", secrets: secretFieldNames(parseJson<AgentRunnerManifest["config_schema"] | undefined>(r.schema, undefined)) }]),
  );
  const agents = await db.select({ agentId: agent.agentId, runnerId: agent.runnerId, runnerConfigJson: agent.runnerConfigJson }).from(agent).all();
  return agents.map((r) => {
    const on = runners.get(r.runnerId);
    const slotAsRead = and(eq(agent.runnerId, r.runnerId), runnerServiceAt(r.runnerId, on?.baseUrl ?? ""));
    return { id: r.agentId, stored: r.runnerConfigJson, slot: agentConfigSlot(r, on?.baseUrl ?? ""), slotAsRead, secretFields: on?.secrets ?? new Set<string>() };
  });
}

/**
 * Every stored credential: a plain value, or a JSON record of values (header and credential names stay readable),
 * with the rows that hold it read with their slots.
 */
const SEALED_COLUMNS = {
  runner_services: {
    table: runnerService, key: runnerService.serviceId, column: runnerService.secret, field: "secret", kind: "value",
    // Not their manifests (up to 1 MiB each).
    rows: async (db: Db): Promise<Row[]> =>
      (await db.select({ serviceId: runnerService.serviceId, baseUrl: runnerService.baseUrl, secret: runnerService.secret }).from(runnerService).all()).map((r) => ({ id: r.serviceId, stored: r.secret, slot: runnerServiceSlot(r), slotAsRead: still(runnerService.baseUrl, r.baseUrl) })),
  },
  bots: {
    table: bot, key: bot.botId, column: bot.credentialsJson, field: "credentialsJson", kind: "record",
    // Of thousands of bots, only what sealing takes.
    rows: async (db: Db): Promise<Row[]> =>
      (await db.select({ botId: bot.botId, platform: bot.platform, apiBaseUrl: bot.apiBaseUrl, credentialsJson: bot.credentialsJson }).from(bot).all()).map((r) => ({ id: r.botId, stored: r.credentialsJson, slot: botSlot(r), slotAsRead: and(still(bot.platform, r.platform), still(bot.apiBaseUrl, r.apiBaseUrl)) })),
  },
  models: {
    table: model, key: model.modelId, column: model.apiKey, field: "apiKey", kind: "value",
    rows: async (db: Db): Promise<Row[]> => (await db.select().from(model).all()).map((r) => ({ id: r.modelId, stored: r.apiKey, slot: modelSlot(r), slotAsRead: still(model.baseUrl, r.baseUrl) })),
  },
  knowledge_bases: {
    table: knowledgeBase, key: knowledgeBase.kbId, column: knowledgeBase.apiKey, field: "apiKey", kind: "value",
    rows: async (db: Db): Promise<Row[]> => (await db.select().from(knowledgeBase).all()).map((r) => ({ id: r.kbId, stored: r.apiKey, slot: knowledgeBaseSlot(r), slotAsRead: still(knowledgeBase.endpoint, r.endpoint) })),
  },
  tools: {
    table: tool, key: tool.toolName, column: tool.headersJson, field: "headersJson", kind: "record",
    rows: async (db: Db): Promise<Row[]> => (await db.select().from(tool).all()).map((r) => ({ id: r.toolName, stored: r.headersJson, slot: toolSlot(r), slotAsRead: still(tool.endpoint, r.endpoint) })),
  },
  mcp_servers: {
    table: mcpServer, key: mcpServer.name, column: mcpServer.headersJson, field: "headersJson", kind: "record",
    rows: async (db: Db): Promise<Row[]> => (await db.select().from(mcpServer).all()).map((r) => ({ id: r.name, stored: r.headersJson, slot: mcpServerSlot(r), slotAsRead: still(mcpServer.url, r.url) })),
  },
  agents: { table: agent, key: agent.agentId, column: agent.runnerConfigJson, field: "runnerConfigJson", kind: "record", rows: agentConfigRows },
} as const satisfies Record<SealedTable, { table: SQLiteTable; key: SQLiteColumn; column: SQLiteColumn; field: string; kind: "value" | "record"; rows: (db: Db) => Promise<Row[]> }>;

export type ResealCounts = Record<keyof typeof SEALED_COLUMNS, number>;

async function resealed(box: SecretBox, kind: "value" | "record", { stored, slot, secretFields }: Row): Promise<string | undefined> {
  if (kind === "value") return box.reseal(stored, slot);
  const record = stored === null ? null : parseJson<Record<string, unknown> | null>(stored, null);
  const credentials = record && (secretFields ? Object.fromEntries(Object.entries(record).filter(([k, v]) => secretFields.has(k) || isSealed(v))) : record);
  const next = credentials && (await resealValues(box, credentials, slot));
  return next ? JSON.stringify({ ...record, ...next }) : undefined;
}

/**
 * Seals every stored credential under the current key and for its row's
 * slot and endpoint (v3): values stored before a key was set, values sealed
 * under SECRETS_KEY_PREVIOUS during a rotation, and values sealed by an
 * earlier release (v1, v2). Values already sealed so are left as they are.
 * Each write applies only if the row still holds what was read, so a
 * credential changed meanwhile is never put back. A value that cannot be
 * opened (sealed under neither key, copied from another row, or left in a
 * row whose endpoint was changed in the database) is counted in `failed`
 * and left as it is; the rest go on. One read and at most one batch of
 * writes per table.
 */
export async function resealStoredSecrets(db: Db): Promise<{ resealed: ResealCounts; failed: ResealCounts }> {
  const resealedCounts = {} as ResealCounts;
  const failed = {} as ResealCounts;
  for (const [name, { table, key, column, field, kind, rows: rowsOf }] of Object.entries(SEALED_COLUMNS) as [keyof typeof SEALED_COLUMNS, (typeof SEALED_COLUMNS)[keyof typeof SEALED_COLUMNS]][]) {
    // The tables differ in type; each entry's key and column belong to its own table, so the casts only forget which one.
    const t = table as SQLiteTable;
    const rows = await rowsOf(db);
    const writes: unknown[] = [];
    failed[name] = 0;
    for (const row of rows) {
      const next = await resealed(db.secrets, kind, row).catch(() => {
        failed[name]++;
        return undefined;
      });
      // Compare-and-set, of the value and of what its slot was built from: row.stored is never null here (a null has nothing to reseal).
      if (next !== undefined) writes.push(db.update(t).set({ [field]: next }).where(and(eq(key, row.id), eq(column, row.stored!), row.slotAsRead)).returning({ id: key }));
    }
    const results = writes.length ? await batchAll(db, writes) : [];
    resealedCounts[name] = results.reduce<number>((n, r) => n + (r as unknown[]).length, 0);
  }
  return { resealed: resealedCounts, failed };
}
