import { dbErrorOf } from "../../db/executor";
import { conflict } from "../../lib/errors";

/** An insert whose primary key may already exist (a concurrent create included): 409, not 500. */
export async function insertUnique<T>(write: () => Promise<T>, what: string): Promise<T> {
  try {
    return await write();
  } catch (err) {
    const dbError = dbErrorOf(err);
    // An integrity trigger's refusal (migration 0008) is not a duplicate: the error handler says what it is.
    if (dbError?.isConstraintViolation && !dbError.integrityRule) throw conflict(`${what} already exists`);
    throw err;
  }
}
