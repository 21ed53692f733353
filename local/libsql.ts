import { createClient, type Client } from "@libsql/client";
import { drizzle } from "drizzle-orm/libsql";
import { migrate } from "drizzle-orm/libsql/migrator";
import { join } from "node:path";
import { libsqlExecutor, type SqlExecutor } from "../src/db/executor";
import { ROOT } from "./build";

/** The embedded database: a libSQL file (or `:memory:`) in this Node process, migrated. */
export async function openEmbeddedDb(url: string): Promise<{ client: Client; executor: SqlExecutor }> {
  const client = createClient({ url });
  // WAL lets readers proceed while a batch writes.
  if (url.startsWith("file:")) await client.execute("PRAGMA journal_mode = WAL");
  await migrate(drizzle(client), { migrationsFolder: join(ROOT, "migrations") });
  return { client, executor: libsqlExecutor(client) };
}
