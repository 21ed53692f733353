import { sql, type SQL } from "drizzle-orm";
import type { SQLiteColumn } from "drizzle-orm/sqlite-core";

/**
 * `column = value` that SQLite never reads through an index on `column` (the unary `+`): for a query another of whose
 * terms has the better index, which the planner, without statistics, would not know.
 */
export const eqUnindexed = (column: SQLiteColumn, value: string): SQL => sql`+${column} = ${value}`;
