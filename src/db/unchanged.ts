import { and, eq, getTableColumns, isNull, type SQL } from "drizzle-orm";
import type { SQLiteTable } from "drizzle-orm/sqlite-core";

/**
 * A WHERE that matches the row only while every column still holds what was read, so a write guarded by it applies
 * over the row as read and never over a concurrent change (a sealed credential is sealed anew with a fresh IV, so
 * even a write of the same key shows as a change).
 */
export function unchanged<T extends SQLiteTable>(table: T, read: T["$inferSelect"]): SQL {
  const values = read as Record<string, unknown>;
  const conditions = Object.entries(getTableColumns(table)).map(([key, column]) => (values[key] === null || values[key] === undefined ? isNull(column) : eq(column, values[key])));
  return and(...conditions)!;
}
