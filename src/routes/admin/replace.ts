import * as z from "zod";
import { badRequest, conflict, notFound } from "../../lib/errors";
import { iso } from "../../lib/json";
import { updatedAtOf } from "../../lib/updated-at";

/** A row as its PUT reads it: when it was created (which one of its id it is) and last replaced. */
type Stamped = { updatedAt: number | null; createdAt: number };

/**
 * The row now stored under the id is the one `read` (the same creation), not one deleted and created anew under its id
 * meanwhile: a write built from the old one is a 404 for that one, as for agents and bots, not a 409 pointing at another.
 */
export const sameCreation = (now: Stamped | undefined, read: Pick<Stamped, "createdAt">): now is Stamped => now !== undefined && now.createdAt === read.createdAt;

/**
 * A PUT's write, applied only over the row as it was read (`read`): when it did not apply, a concurrent DELETE is a 404
 * (also when the id was created anew meanwhile) and a concurrent change (another PUT, a refresh, a reseal) a 409 naming
 * the updated_at now stored, never silently undone.
 */
export async function replaceOrExplain(write: () => Promise<boolean>, read: Stamped, current: () => Promise<Stamped | undefined>, what: string): Promise<void> {
  if (await write()) return;
  const now = await current();
  if (!sameCreation(now, read)) throw notFound(`${what} not found (deleted meanwhile)`);
  throw changedMeanwhile(`${what} was changed meanwhile; read it again`, updatedAtOf(now));
}

/** A write over the row as read that another write beat: a 409 naming the stored updated_at, as a stale copy's is. */
export const changedMeanwhile = (message: string, storedUpdatedAt: number) => conflict(message, { updated_at: iso(storedUpdatedAt) });

/** As a GET answers it (ISO 8601 with Z, or the same instant with an offset): `Date.parse` alone takes "1" or "x 1" for a time. */
const UpdatedAtSchema = z.iso.datetime({ offset: true });

/**
 * A PUT body that is a GET's answer sent back carries the `updated_at` it read: a write since then (another operator's,
 * a script's) is a 409, not overwritten by the older copy. A body without it (a config file, a script building it) is
 * applied over whatever is stored, as before.
 */
export function checkReadAsStored(sentUpdatedAt: string | undefined, storedUpdatedAt: number, what: string): void {
  if (sentUpdatedAt === undefined) return;
  const stored = iso(storedUpdatedAt)!;
  // A typo is the caller's mistake to fix, not a change of the row to read again.
  if (!UpdatedAtSchema.safeParse(sentUpdatedAt).success) throw badRequest(`updated_at ${JSON.stringify(sentUpdatedAt.slice(0, 40))} is not a time: send the updated_at a GET answered (ISO 8601, such as 2026-01-31T12:00:00.000Z), or leave it out`);
  if (Date.parse(sentUpdatedAt) !== storedUpdatedAt) throw conflict(`${what} was changed after the copy this body was read from (its updated_at ${sentUpdatedAt.slice(0, 40)}, now ${stored}); read it again, or leave updated_at out to replace it whatever changed`, { updated_at: stored });
}
