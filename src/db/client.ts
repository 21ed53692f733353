import { drizzle, type SqliteRemoteDatabase } from "drizzle-orm/sqlite-proxy";
import * as schema from "./schema";
import type { SqlExecutor } from "./executor";
import { secretBox, type SecretBox } from "../lib/secret-box";

/** The database, and the box that seals the credentials stored in it. */
export type Db = SqliteRemoteDatabase<typeof schema> & { readonly secrets: SecretBox };

/** Without a box, secrets are stored as given (unit tests, migrations). */
export function createDb(executor: SqlExecutor, secrets: SecretBox = secretBox(undefined)): Db {
  const db = drizzle(
    async (sql, params, method) => executor.query({ sql, params, method }),
    async (queries) => executor.batch(queries),
    { schema },
  );
  return Object.assign(db, { secrets });
}

type BatchItems = Parameters<Db["batch"]>[0];
/** One statement of a batch. */
export type BatchItem = BatchItems[number];

/** One round trip for a non-empty list of statements built at run time; results in statement order. */
export async function batchAll(db: Db, statements: unknown[]): Promise<readonly unknown[]> {
  // The tuple type drizzle wants for batch() cannot be spelled for a dynamic list; the items are all batchable queries.
  return (await db.batch(statements as unknown as BatchItems)) as readonly unknown[];
}

/** Like batchAll for writes; nothing is sent for an empty list. */
export async function writeAll(db: Db, statements: unknown[]): Promise<void> {
  if (statements.length) await batchAll(db, statements);
}
