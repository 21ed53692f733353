import { asc, gt, sql, type SQL } from "drizzle-orm";
import type { SQLiteColumn, SQLiteTable } from "drizzle-orm/sqlite-core";
import type { Db } from "../db/client";
import type { TimeIdPosition } from "../lib/cursor";

/** A page of an admin listing: at most `limit` rows after `after` (the last row of the previous page). */
export interface ListPage {
  limit: number;
  after?: TimeIdPosition;
}

/** How a listing is ordered: by creation time then id, or by id alone (a table without creation times; positions then carry time 0). */
export interface ListOrder {
  time?: SQLiteColumn;
  id: SQLiteColumn;
}

/**
 * The keyset of a page: rows strictly after its position, in the listing's
 * order, one more than the page holds (telling whether another follows).
 * Deep pages cost what the first does; a row created or removed between two
 * pages moves no other row across the page boundary.
 */
export function pageQuery(order: ListOrder, page: ListPage): { where: SQL | undefined; orderBy: SQL[]; limit: number } {
  const { time, id } = order;
  const after = page.after;
  // A row value, which the index reads as a range starting at the position (OR-ed terms on parameters are walked from its first entry).
  const where = !after ? undefined : time ? sql`(${time}, ${id}) > (${after.time}, ${after.id})` : gt(id, after.id);
  return { where, orderBy: time ? [asc(time), asc(id)] : [asc(id)], limit: page.limit + 1 };
}

/** A page of `table`'s rows (one more than the page holds), in `order`. */
export function selectPage<T extends SQLiteTable>(db: Db, table: T, order: ListOrder, page: ListPage): Promise<T["$inferSelect"][]> {
  const q = pageQuery(order, page);
  return db.select().from(table).where(q.where).orderBy(...q.orderBy).limit(q.limit).all();
}
