import { badRequest, conflict, notFound } from "../../lib/errors";
import { iso } from "../../lib/json";

/**
 * A PUT's write, applied only over the row as it was read: when it did not apply, a concurrent DELETE is a 404 and
 * a concurrent change (another PUT, a refresh, a reseal) a 409, never silently undone.
 */
export async function replaceOrExplain(write: () => Promise<boolean>, stillThere: () => Promise<unknown>, what: string): Promise<void> {
  if (await write()) return;
  if (!(await stillThere())) throw notFound(`${what} not found`);
  throw conflict(`${what} was changed meanwhile; read it again`);
}

/**
 * A PUT body that is a GET's answer sent back carries the `updated_at` it read: a write since then (another operator's,
 * a script's) is a 409, not overwritten by the older copy. A body without it (a config file, a script building it) is
 * applied over whatever is stored, as before.
 */
export function checkReadAsStored(sentUpdatedAt: string | undefined, storedUpdatedAt: number, what: string): void {
  if (sentUpdatedAt === undefined) return;
  const stored = iso(storedUpdatedAt)!;
  const sent = Date.parse(sentUpdatedAt);
  // A typo is the caller's mistake to fix, not a change of the row to read again.
  if (Number.isNaN(sent)) throw badRequest(`updated_at ${JSON.stringify(sentUpdatedAt.slice(0, 40))} is not a time: send the updated_at a GET answered (ISO 8601, such as 2026-01-31T12:00:00.000Z), or leave it out`);
  if (sent !== storedUpdatedAt) throw conflict(`${what} was changed after the copy this body was read from (its updated_at ${sentUpdatedAt.slice(0, 40)}, now ${stored}); read it again, or leave updated_at out to replace it whatever changed`, { updated_at: stored });
}

/** A replaced row's updated_at: later than the one it replaces even within the same millisecond, so a copy read before a write never matches after it. */
export const nextUpdatedAt = (previous: number): number => Math.max(Date.now(), previous + 1);
