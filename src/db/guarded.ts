import { getTableColumns, sql, type Placeholder, type SQL } from "drizzle-orm";
import type { SQLiteTable } from "drizzle-orm/sqlite-core";
import type { Db } from "./client";

/**
 * `INSERT INTO t (...) SELECT ... WHERE guard`: an insert that takes effect
 * only if `guard` holds when it runs, so a batch can make its later writes
 * depend on an earlier one without a round trip in between. A value may be
 * SQL (a subquery) evaluated inside the same statement, or a placeholder
 * of a compiled statement.
 */
export function insertWhere<T extends SQLiteTable>(
  db: Db,
  table: T,
  values: { [K in keyof T["$inferInsert"]]: T["$inferInsert"][K] | SQL | Placeholder },
  guard: SQL = sql`1`,
) {
  const columns = getTableColumns(table);
  const entries = Object.entries(values as Record<string, unknown>).filter(([, v]) => v !== undefined);
  const names = sql.join(entries.map(([k]) => sql.identifier(columns[k].name)), sql`, `);
  const vals = sql.join(entries.map(([, v]) => sql`${typeof v === "boolean" ? Number(v) : v}`), sql`, `);
  return db.run(sql`INSERT INTO ${table} (${names}) SELECT ${vals} WHERE ${guard}`);
}
