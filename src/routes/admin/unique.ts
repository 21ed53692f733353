import { DbError } from "../../db/executor";
import { conflict } from "../../lib/errors";

/** An insert whose primary key may already exist (a concurrent create included): 409, not 500. */
export async function insertUnique(write: () => Promise<unknown>, what: string): Promise<void> {
  try {
    await write();
  } catch (err) {
    if (err instanceof DbError && err.isConstraintViolation) throw conflict(`${what} already exists`);
    throw err;
  }
}
