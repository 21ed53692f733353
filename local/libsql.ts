import { createClient, type Client } from "@libsql/client";
import { drizzle } from "drizzle-orm/libsql";
import { migrate } from "drizzle-orm/libsql/migrator";
import { join } from "node:path";
import { libsqlExecutor, type SqlExecutor } from "../src/db/executor";
import { ROOT } from "./build";

/** The embedded database: a libSQL file (or `:memory:`) in this Node process, migrated. */
export async function openEmbeddedDb(url: string): Promise<{ client: Client; executor: SqlExecutor }> {
  const client = createClient({ url });
  if (url.startsWith("file:")) {
    // WAL lets readers proceed while a batch writes; NORMAL syncs at checkpoints,
    // not on every commit: a crash of this process loses nothing, a power cut
    // may lose the last commits. The production database is Turso/sqld.
    await client.execute("PRAGMA journal_mode = WAL");
    await client.execute("PRAGMA synchronous = NORMAL");
  }
  await migrate(drizzle(client), { migrationsFolder: join(ROOT, "migrations") });
  return { client, executor: libsqlExecutor(client) };
}
