import { sql } from "drizzle-orm";
// The journal drizzle-kit writes beside migrations/: bundled, so the Worker knows which migration it was built for.
import journal from "../../migrations/meta/_journal.json";
import type { Db } from "./client";

export interface Migration {
  tag: string;
  /** drizzle's `created_at` for the migration: the journal's `when`, in ms. */
  when: number;
}

const migrations: Migration[] = journal.entries.map((e) => ({ tag: e.tag, when: e.when }));

/** The newest migration in migrations/ when this Worker was built. */
export const newestMigration: Migration = migrations.reduce((a, b) => (b.when > a.when ? b : a));

/**
 * The newest migration applied to the database, from the table both `npm run db:migrate` (drizzle-kit) and
 * `npm start` (drizzle's migrator) keep; null when none is. A database never migrated has no such table: the
 * query's "no such table" is the database's own `database_not_migrated`.
 */
export async function appliedMigration(db: Db): Promise<Migration | null> {
  const [row] = await db.all<[number | string | null]>(sql`SELECT max(created_at) FROM __drizzle_migrations`);
  if (row?.[0] == null) return null;
  const applied = Number(row[0]);
  return migrations.find((m) => m.when === applied) ?? { tag: "newer than this version", when: applied };
}
