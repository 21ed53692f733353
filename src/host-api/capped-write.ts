import { batchAll, type Db } from "../db/client";
import { asRoom, capPassed, capRefusal, type CapSubject, type DataCap } from "../stores/data-caps";
import { ApiError } from "./errors";

/**
 * A `state.set` or `storage.set` write, which the database applies only if it fits its scope's or area's cap when it
 * runs (stores/data-caps.ts), batched with the read of that room: one transaction, so the read is what the guard saw.
 * Written, or not written though it fitted (a trigger ignored it: its agent or service is gone, answered as usual,
 * migrations 0012 to 0014), it returns. Past the cap it is refused 413 `payload_too_large`, not retryable: the write
 * does not fit in what the scope may hold, and unlike a run's 429 budgets no wait brings room back, only deletes;
 * the details name the cap and the usage.
 */
export async function writeWithinCap(db: Db, statements: { write: unknown; room: unknown }, size: number, cap: DataCap, subject: CapSubject): Promise<void> {
  const [written, room] = await batchAll(db, [statements.write, statements.room]);
  if ((written as unknown[]).length) return;
  const read = asRoom((room as unknown[][])[0]);
  const passed = capPassed(read, size, cap);
  if (!passed) return;
  const { message, facts } = capRefusal(subject, passed, read, size, cap);
  throw new ApiError("payload_too_large", message, { retryable: false, details: facts });
}
