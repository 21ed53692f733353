import * as z from "zod";

/**
 * `?limit` of a listing, 1 to `max`, written in decimal digits: `0x10`, `1e2`
 * or ` 5` is a 400, not silently a page of 16, 100 or 5 as `Number()` reads them.
 */
export const pageLimit = (max: number, fallback: number) =>
  z
    .string()
    .regex(/^[0-9]{1,9}$/, `limit must be a whole number from 1 to ${max}, in decimal digits`)
    .transform(Number)
    .pipe(z.number().int().min(1).max(max))
    .default(fallback);

/** `?cursor`: a previous page's `next_cursor`. Empty is a 400, not a silent read from the start. */
export const pageCursor = z.string().min(1, "cursor must be a previous page's next_cursor; omit it to start from the beginning").max(2048);
