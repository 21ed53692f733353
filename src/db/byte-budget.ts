import { sql, type SQL } from "drizzle-orm";
import type { SQLiteColumn } from "drizzle-orm/sqlite-core";

/** A text column's size in bytes (UTF-8), not characters. */
export const byteLength = (column: SQLiteColumn | SQL.Aliased): SQL<number> => sql<number>`length(cast(${column} as blob))`;

/** The running total of a text column's bytes in `order` (a window): where a page or snapshot is cut to its byte budget. */
export const runningBytes = (column: SQLiteColumn | SQL.Aliased, order: SQLiteColumn | SQL.Aliased): SQL<number> =>
  sql<number>`sum(${byteLength(column)}) over (order by ${order})`;

/** The bytes of a row's text columns (nulls count nothing): what a page budget counts. */
export const rowBytes = (...columns: (SQLiteColumn | SQL.Aliased)[]): SQL<number> => sql<number>`(${sql.join(columns.map((c) => sql`coalesce(${byteLength(c)}, 0)`), sql` + `)})`;

/**
 * Whether a row of a page, in the page's `order` (an `order by ...` window clause), fits the page's byte budget with
 * the rows before it (`own`: its bytes); the first row always does, so a page never comes back empty.
 */
export const withinBudget = (own: SQLiteColumn | SQL.Aliased, order: SQL, maxBytes: number): SQL<number> =>
  sql<number>`(row_number() over (${order}) = 1 or sum(${own}) over (${order}) <= ${maxBytes})`.mapWith(Number);

/** `column` for a row within the budget; null past it (such a row is only read to tell that more follow). */
export const ifWithin = <T>(within: SQL<number>, column: SQLiteColumn | SQL.Aliased): SQL<T | null> => sql<T | null>`case when ${within} then ${column} end`;

/** A page read one row past its limit, cut to the rows within its budget: those (at most `limit`), and whether more follow. */
export function budgetedPage<R extends { within: number }>(read: R[], limit: number): { rows: Omit<R, "within">[]; hasMore: boolean } {
  const rows = read.filter((r) => r.within).slice(0, limit).map(({ within: _within, ...row }) => row);
  return { rows, hasMore: read.length > rows.length };
}

/** The fields of a subquery (`read`) that selected `columns`, named as its own: what an outer query selects from it. */
export function fieldsOf<C extends object>(read: object, columns: C): C {
  // `read` selected every key of `columns`: its proxy answers each by name, as a field of the subquery.
  return Object.fromEntries(Object.keys(columns).map((k) => [k, (read as Record<string, unknown>)[k]])) as C;
}
