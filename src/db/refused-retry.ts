import { dbErrorOf, mayHaveApplied } from "./executor";

/** A write the database refused for a moment (busy, away) is tried again after each of these pauses before it is given up. */
export const REFUSED_WRITE_RETRY_MS = [200, 1_000, 3_000];

/**
 * `write`, tried again after each pause while the database refuses it: refused, it was not applied, so the same rows
 * are written once. Not after a constraint refused it (it would again), nor after one that got no answer (it may
 * have been applied): that error is thrown, as is the last refusal.
 */
export async function retryingRefused<T>(write: () => Promise<T>, pausesMs: readonly number[] = REFUSED_WRITE_RETRY_MS): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await write();
    } catch (err) {
      if (mayHaveApplied(err) || dbErrorOf(err)?.isConstraintViolation || attempt >= pausesMs.length) throw err;
      await new Promise((r) => setTimeout(r, pausesMs[attempt]));
    }
  }
}
