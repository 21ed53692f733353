import { createClient } from "@libsql/client";
import { drizzle } from "drizzle-orm/libsql";
import { migrate } from "drizzle-orm/libsql/migrator";
import { cpSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "../../local/build";

type Journal = { entries: { tag: string }[] };

/** The migrations folder as it stood before `tag` (same files, journal cut there), copied into `dir`. */
export function migrationsBefore(tag: string, dir: string): string {
  cpSync(join(ROOT, "migrations"), dir, { recursive: true });
  const journal = JSON.parse(readFileSync(join(dir, "meta/_journal.json"), "utf8")) as Journal;
  const cut = journal.entries.findIndex((e) => e.tag === tag);
  if (cut <= 0) throw new Error(`no migration ${tag} after the first`);
  writeFileSync(join(dir, "meta/_journal.json"), JSON.stringify({ ...journal, entries: journal.entries.slice(0, cut) }));
  return dir;
}

/** Every migration's tag, in order, as drizzle-kit's journal lists them. */
export const migrationTags = (): string[] => (JSON.parse(readFileSync(join(ROOT, "migrations/meta/_journal.json"), "utf8")) as Journal).entries.map((e) => e.tag);

/** A libSQL file as a release whose last migration came before `tag` left it: its migrations applied, as it recorded them. */
export async function databaseBefore(tag: string, path: string, migrationsDir: string): Promise<void> {
  const client = createClient({ url: `file:${path}` });
  try {
    await migrate(drizzle(client), { migrationsFolder: migrationsBefore(tag, migrationsDir) });
  } finally {
    client.close();
  }
}
