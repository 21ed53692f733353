import { sql, type SQL } from "drizzle-orm";
import type { SQLiteColumn } from "drizzle-orm/sqlite-core";

/** A text column's size in bytes (UTF-8), not characters. */
export const byteLength = (column: SQLiteColumn | SQL.Aliased): SQL<number> => sql<number>`length(cast(${column} as blob))`;

/** The running total of a text column's bytes in `order` (a window): where a page or snapshot is cut to its byte budget. */
export const runningBytes = (column: SQLiteColumn | SQL.Aliased, order: SQLiteColumn | SQL.Aliased): SQL<number> =>
  sql<number>`sum(${byteLength(column)}) over (order by ${order})`;
