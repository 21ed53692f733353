import { DbError } from "../../db/executor";
import { conflict } from "../../lib/errors";

/** drizzle wraps a failed single query (DrizzleQueryError); the driver's error is its cause. */
function isConstraintViolation(err: unknown): boolean {
  let e = err;
  for (let depth = 0; e && depth < 5; depth++, e = (e as { cause?: unknown }).cause) {
    if (e instanceof DbError) return e.isConstraintViolation;
  }
  return false;
}

/** An insert whose primary key may already exist (a concurrent create included): 409, not 500. */
export async function insertUnique(write: () => Promise<unknown>, what: string): Promise<void> {
  try {
    await write();
  } catch (err) {
    if (isConstraintViolation(err)) throw conflict(`${what} already exists`);
    throw err;
  }
}
