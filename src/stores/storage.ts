import { and, asc, eq, gt, gte, lt } from "drizzle-orm";
import type { Db } from "../db/client";
import { storage } from "../db/schema";
import type { StorageArea } from "../protocol/host-api";
import { prefixUpperBound } from "../lib/key-range";

/** One owner's keys in one area: `plugin` is owned by a runner service, `workspace` by a workspace. */
export interface StorageOwner {
  area: StorageArea;
  ownerKey: string;
}

export function storageStore(db: Db) {
  const s = storage;
  const of = (o: StorageOwner) => [eq(s.area, o.area), eq(s.ownerKey, o.ownerKey)];
  return {
    async get(o: StorageOwner, key: string): Promise<string | undefined> {
      const row = await db.select({ value: s.valueBase64 }).from(s).where(and(...of(o), eq(s.key, key))).get();
      return row?.value;
    },
    setStatement(o: StorageOwner, key: string, valueBase64: string) {
      const updatedAt = Date.now();
      return db
        .insert(s)
        .values({ area: o.area, ownerKey: o.ownerKey, key, valueBase64, updatedAt })
        .onConflictDoUpdate({ target: [s.area, s.ownerKey, s.key], set: { valueBase64, updatedAt } });
    },
    deleteStatement(o: StorageOwner, key: string) {
      return db.delete(s).where(and(...of(o), eq(s.key, key)));
    },
    /** Keys in order, after `afterKey`; a primary-key range scan whatever the prefix holds. */
    async keys(o: StorageOwner, opts: { prefix?: string; afterKey?: string; limit: number }) {
      const conds = of(o);
      // A key range rather than LIKE: exact for any characters (%, _ and non-BMP included), an index range scan.
      if (opts.prefix) {
        conds.push(gte(s.key, opts.prefix));
        const bound = prefixUpperBound(opts.prefix);
        if (bound !== undefined) conds.push(lt(s.key, bound));
      }
      if (opts.afterKey) conds.push(gt(s.key, opts.afterKey));
      const rows = await db.select({ key: s.key }).from(s).where(and(...conds)).orderBy(asc(s.key)).limit(opts.limit + 1).all();
      return { keys: rows.slice(0, opts.limit).map((r) => r.key), hasMore: rows.length > opts.limit };
    },
  };
}
