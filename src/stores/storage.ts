import { and, eq, sql, type Placeholder } from "drizzle-orm";
import type { Db } from "../db/client";
import { compiled, param } from "../db/compiled";
import { insertFromWhereReturning } from "../db/guarded";
import { storage, storageUsage } from "../db/schema";
import type { StorageArea } from "../protocol/host-api";
import { storedBytes, fitsRoom, NEW_VALUE, ROOM, roomQuery, roomValues, type DataCap, type RoomParts } from "./data-caps";
import { keyPage, type KeyPageOptions } from "./key-page";

/** One owner's keys in one area: `plugin` is owned by a runner service, `workspace` by a workspace. */
export interface StorageOwner {
  area: StorageArea;
  ownerKey: string;
}

const s = storage;
const u = storageUsage;
/** How a capped write reads an area's usage and a key's present size (data-caps.ts). */
const roomOf = (area: Placeholder, ownerKey: Placeholder, key: Placeholder): RoomParts => ({
  keys: sql`SELECT ${u.keys} FROM ${u} WHERE ${u.area} = ${area} AND ${u.ownerKey} = ${ownerKey}`,
  bytes: sql`SELECT ${u.bytes} FROM ${u} WHERE ${u.area} = ${area} AND ${u.ownerKey} = ${ownerKey}`,
  oldSize: sql`SELECT ${storedBytes(s.valueBase64)} FROM ${s} WHERE ${s.area} = ${area} AND ${s.ownerKey} = ${ownerKey} AND ${s.key} = ${key}`,
});
const roomOfParams = () => roomOf(param("area"), param("ownerKey"), param("key"));
/** A write: applied only if it fits the area's cap when it runs (its one row says it was written). */
const cappedUpsert = compiled((db) =>
  insertFromWhereReturning(
    db,
    s,
    { area: param("area"), ownerKey: param("ownerKey"), key: param("key"), valueBase64: NEW_VALUE, updatedAt: param("updatedAt") },
    { name: ROOM, query: roomQuery(roomOfParams(), param("valueBase64")) },
    fitsRoom(storedBytes(NEW_VALUE), { maxKeys: param("maxKeys"), maxBytes: param("maxBytes") }),
    sql`ON CONFLICT (${sql.identifier(s.area.name)}, ${sql.identifier(s.ownerKey.name)}, ${sql.identifier(s.key.name)}) DO UPDATE SET ${sql.identifier(s.valueBase64.name)} = excluded.${sql.identifier(s.valueBase64.name)}, ${sql.identifier(s.updatedAt.name)} = excluded.${sql.identifier(s.updatedAt.name)}`,
    sql`1`,
  ),
);
// `all`, not `get`: drizzle takes a raw `get` of a batch as the first value of its row (sqlite-proxy), not the row.
const room = compiled((db) => db.all<unknown[]>(sql`SELECT ${roomValues(roomOfParams())}`));

export function storageStore(db: Db) {
  const of = (o: StorageOwner) => [eq(s.area, o.area), eq(s.ownerKey, o.ownerKey)];
  return {
    async get(o: StorageOwner, key: string): Promise<string | undefined> {
      const row = await db.select({ value: s.valueBase64 }).from(s).where(and(...of(o), eq(s.key, key))).get();
      return row?.value;
    },
    /** The write of one key (padded base64), within the area's cap (data-caps.ts): answers a row when written, none when it did not fit (or the service is gone, 0013). */
    setStatement: (o: StorageOwner, key: string, valueBase64: string, cap: DataCap) => cappedUpsert(db, { ...o, key, valueBase64, updatedAt: Date.now(), ...cap }),
    /** The area's usage and the key's size, read in the batch of a setStatement to tell why it wrote nothing. */
    roomStatement: (o: StorageOwner, key: string) => room(db, { ...o, key }),
    deleteStatement(o: StorageOwner, key: string) {
      return db.delete(s).where(and(...of(o), eq(s.key, key)));
    },
    /** Keys in order, after `afterKey`; a primary-key range scan whatever the prefix holds. */
    keys: (o: StorageOwner, opts: KeyPageOptions) => keyPage(db, s, s.key, of(o), opts),
  };
}
