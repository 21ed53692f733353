import { conflict, notFound } from "../../lib/errors";

/**
 * A PUT's write, applied only over the row as it was read: when it did not apply, a concurrent DELETE is a 404 and
 * a concurrent change (another PUT, a refresh, a reseal) a 409, never silently undone.
 */
export async function replaceOrExplain(write: () => Promise<boolean>, stillThere: () => Promise<unknown>, what: string): Promise<void> {
  if (await write()) return;
  if (!(await stillThere())) throw notFound(`${what} not found`);
  throw conflict(`${what} was changed meanwhile; read it again`);
}
