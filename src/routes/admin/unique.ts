import { dbErrorOf } from "../../db/executor";
import { conflict } from "../../lib/errors";

/** An insert whose primary key may already exist (a concurrent create included): 409, not 500. */
export async function insertUnique(write: () => Promise<unknown>, what: string): Promise<void> {
  try {
    await write();
  } catch (err) {
    const dbError = dbErrorOf(err);
    // An integrity trigger's refusal (migration 0008) is not a duplicate: the error handler says what it is.
    if (dbError?.isConstraintViolation && !dbError.integrityRule) throw conflict(`${what} already exists`);
    throw err;
  }
}
