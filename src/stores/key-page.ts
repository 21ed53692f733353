import { and, asc, gt, gte, lt, type SQL } from "drizzle-orm";
import type { SQLiteColumn, SQLiteTable } from "drizzle-orm/sqlite-core";
import type { Db } from "../db/client";
import { prefixUpperBound } from "../lib/key-range";

export interface KeyPageOptions {
  prefix?: string;
  afterKey?: string;
  limit: number;
}

/**
 * One keyset page of a text key column inside an owner's rows (state scope,
 * storage area), in key order. A key range rather than LIKE: exact for any
 * characters (%, _ and non-BMP included), and an index range scan whatever
 * the prefix holds.
 */
export async function keyPage(db: Db, table: SQLiteTable, key: SQLiteColumn, owner: SQL[], opts: KeyPageOptions) {
  const conds = [...owner];
  if (opts.prefix) {
    conds.push(gte(key, opts.prefix));
    const bound = prefixUpperBound(opts.prefix);
    if (bound !== undefined) conds.push(lt(key, bound));
  }
  if (opts.afterKey) conds.push(gt(key, opts.afterKey));
  const rows = (await db.select({ key }).from(table).where(and(...conds)).orderBy(asc(key)).limit(opts.limit + 1).all()) as { key: string }[];
  return { keys: rows.slice(0, opts.limit).map((r) => r.key), hasMore: rows.length > opts.limit };
}
