import type { Context } from "hono";
import * as z from "zod";
import { decodeTimeIdCursor, encodeTimeIdCursor, type TimeIdPosition } from "../../lib/cursor";
import type { ListPage } from "../../stores/list-page";
import { decodeOr400 } from "../app-env";
import { pageCursor, pageLimit } from "../query";

/** `?limit` (1 to 200, default 100) and `?cursor` (a previous page's `next_cursor`) of every admin listing. */
export const AdminListQuery = z.strictObject({
  limit: pageLimit(200, 100),
  cursor: pageCursor.optional(),
});

export interface Listing<Row> {
  /** Names the listing in its cursors, so one listing's cursor is refused by another. */
  kind: string;
  /** Up to one row more than the page holds (pageQuery), or a page its store cut to a byte budget. */
  read: (page: ListPage) => Promise<Row[] | { rows: Row[]; hasMore: boolean }>;
  /** Where a row sits in the listing's order. */
  position: (row: Row) => TimeIdPosition;
  view: (rows: Row[]) => unknown[] | Promise<unknown[]>;
}

/**
 * One page of an admin listing (query validated with AdminListQuery) as
 * `{items, next_cursor?, has_more}`. A cursor of another listing, or not a
 * cursor, is a 400.
 */
export async function listing<Row>(c: Context, q: z.output<typeof AdminListQuery>, { kind, read, position, view }: Listing<Row>) {
  const after = q.cursor ? decodeOr400(() => decodeTimeIdCursor(`admin-${kind}`, q.cursor!)) : undefined;
  const got = await read({ limit: q.limit, after });
  const cut = Array.isArray(got) ? { rows: got.slice(0, q.limit), hasMore: got.length > q.limit } : got;
  const page = cut.rows;
  const last = page[page.length - 1];
  const hasMore = cut.hasMore && last !== undefined;
  return c.json({ items: await view(page), ...(hasMore ? { next_cursor: encodeTimeIdCursor(`admin-${kind}`, position(last)) } : {}), has_more: hasMore });
}
