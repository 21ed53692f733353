import { dbErrorOf, mayHaveApplied } from "./executor";

/**
 * `write`, tried again after each pause (DB_WRITE_RETRY_PAUSES_MS) while the database refuses it: refused, it was not applied, so the same rows
 * are written once. Not after a constraint refused it (it would again), nor after one that got no answer (it may
 * have been applied): that error is thrown, as is the last refusal.
 */
export async function retryingRefused<T>(write: () => Promise<T>, pausesMs: readonly number[]): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await write();
    } catch (err) {
      if (mayHaveApplied(err) || dbErrorOf(err)?.isConstraintViolation || attempt >= pausesMs.length) throw err;
      await new Promise((r) => setTimeout(r, pausesMs[attempt]));
    }
  }
}
