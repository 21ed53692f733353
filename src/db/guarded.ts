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
  return db.run(insertWhereSql(table, values, guard));
}

/** insertWhere's statement with `RETURNING returning`: the inserted row's values (none when the guard failed). */
export function insertWhereReturning<T extends SQLiteTable>(
  db: Db,
  table: T,
  values: { [K in keyof T["$inferInsert"]]: T["$inferInsert"][K] | SQL | Placeholder },
  guard: SQL,
  returning: SQL,
) {
  return db.all(sql`${insertWhereSql(table, values, guard)} RETURNING ${returning}`);
}

/** insertWhere's statement followed by `onConflict` (an ON CONFLICT clause: the SELECT's WHERE keeps SQLite's upsert unambiguous). */
export function insertWhereOnConflict<T extends SQLiteTable>(
  db: Db,
  table: T,
  values: { [K in keyof T["$inferInsert"]]: T["$inferInsert"][K] | SQL | Placeholder },
  guard: SQL,
  onConflict: SQL,
) {
  return db.run(sql`${insertWhereSql(table, values, guard)} ${onConflict}`);
}

/**
 * insertWhereOnConflict over what `source.query` reads, computed once (a MATERIALIZED common table expression named
 * `source.name`, which the guard and values may name however often), returning `returning` for the row written: none
 * when the guard refused it (or a trigger ignored it).
 */
export function insertFromWhereReturning<T extends SQLiteTable>(
  db: Db,
  table: T,
  values: { [K in keyof T["$inferInsert"]]: T["$inferInsert"][K] | SQL | Placeholder },
  source: { name: SQL; query: SQL },
  guard: SQL,
  onConflict: SQL,
  returning: SQL,
) {
  return db.all(sql`WITH ${source.name} AS MATERIALIZED (${source.query}) ${insertWhereSql(table, values, guard, source.name)} ${onConflict} RETURNING ${returning}`);
}

function insertWhereSql<T extends SQLiteTable>(table: T, values: Record<string, unknown>, guard: SQL, from?: SQL): SQL {
  const columns = getTableColumns(table);
  const entries = Object.entries(values).filter(([, v]) => v !== undefined);
  const names = sql.join(entries.map(([k]) => sql.identifier(columns[k].name)), sql`, `);
  const vals = sql.join(entries.map(([, v]) => sql`${typeof v === "boolean" ? Number(v) : v}`), sql`, `);
  return sql`INSERT INTO ${table} (${names}) SELECT ${vals}${from ? sql` FROM ${from}` : sql``} WHERE ${guard}`;
}
