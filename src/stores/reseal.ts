import { and, eq } from "drizzle-orm";
import type { SQLiteColumn, SQLiteTable } from "drizzle-orm/sqlite-core";
import { batchAll, type Db } from "../db/client";
import { bot, knowledgeBase, mcpServer, model, runnerService, tool } from "../db/schema";
import { parseJson } from "../lib/json";
import { resealValues, type SealedTable, type SecretBox } from "../lib/secret-box";

/** Every stored credential: a plain value, or a JSON record of values (header and credential names stay readable). */
const SEALED_COLUMNS = {
  runner_services: { table: runnerService, key: runnerService.serviceId, column: runnerService.secret, field: "secret", kind: "value" },
  bots: { table: bot, key: bot.botId, column: bot.credentialsJson, field: "credentialsJson", kind: "record" },
  models: { table: model, key: model.modelId, column: model.apiKey, field: "apiKey", kind: "value" },
  knowledge_bases: { table: knowledgeBase, key: knowledgeBase.kbId, column: knowledgeBase.apiKey, field: "apiKey", kind: "value" },
  tools: { table: tool, key: tool.toolName, column: tool.headersJson, field: "headersJson", kind: "record" },
  mcp_servers: { table: mcpServer, key: mcpServer.name, column: mcpServer.headersJson, field: "headersJson", kind: "record" },
} as const satisfies Record<SealedTable, { table: SQLiteTable; key: SQLiteColumn; column: SQLiteColumn; field: string; kind: "value" | "record" }>;

export type ResealCounts = Record<keyof typeof SEALED_COLUMNS, number>;

async function resealed(box: SecretBox, kind: "value" | "record", stored: string | null, slot: { table: SealedTable; id: string }): Promise<string | undefined> {
  if (kind === "value") return box.reseal(stored, slot);
  const record = stored === null ? null : parseJson<Record<string, unknown> | null>(stored, null);
  const next = record && (await resealValues(box, record, slot));
  return next ? JSON.stringify(next) : undefined;
}

/**
 * Seals every stored credential under the current key: values stored before
 * a key was set, and values sealed under SECRETS_KEY_PREVIOUS during a
 * rotation. Values already sealed under the current key are left as they
 * are. Each write applies only if the row still holds what was read, so a
 * credential changed meanwhile is never put back. A value that cannot be
 * opened is counted in `failed` and left as it is; the rest go on. One read
 * and at most one batch of writes per table.
 */
export async function resealStoredSecrets(db: Db): Promise<{ resealed: ResealCounts; failed: ResealCounts }> {
  const resealedCounts = {} as ResealCounts;
  const failed = {} as ResealCounts;
  for (const [name, { table, key, column, field, kind }] of Object.entries(SEALED_COLUMNS) as [keyof typeof SEALED_COLUMNS, (typeof SEALED_COLUMNS)[keyof typeof SEALED_COLUMNS]][]) {
    // The six tables differ in type; each entry's key and column belong to its own table, so the casts only forget which one.
    const t = table as SQLiteTable;
    const rows = (await db.select({ id: key, stored: column }).from(t).all()) as { id: string; stored: string | null }[];
    const writes: unknown[] = [];
    failed[name] = 0;
    for (const row of rows) {
      const next = await resealed(db.secrets, kind, row.stored, { table: name, id: row.id }).catch(() => {
        failed[name]++;
        return undefined;
      });
      // Compare-and-set: row.stored is never null here (a null has nothing to reseal).
      if (next !== undefined) writes.push(db.update(t).set({ [field]: next }).where(and(eq(key, row.id), eq(column, row.stored!))).returning({ id: key }));
    }
    const results = writes.length ? await batchAll(db, writes) : [];
    resealedCounts[name] = results.reduce<number>((n, r) => n + (r as unknown[]).length, 0);
  }
  return { resealed: resealedCounts, failed };
}
