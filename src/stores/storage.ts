import { and, eq } from "drizzle-orm";
import type { Db } from "../db/client";
import { storage } from "../db/schema";
import type { StorageArea } from "../protocol/host-api";
import { keyPage, type KeyPageOptions } from "./key-page";

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
    keys: (o: StorageOwner, opts: KeyPageOptions) => keyPage(db, s, s.key, of(o), opts),
  };
}
