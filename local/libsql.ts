import Database from "libsql";
import { migrate } from "drizzle-orm/sqlite-proxy/migrator";
import { join } from "node:path";
import { createDb } from "../src/db/client";
import { DbError, type SqlExecutor, type SqlQuery, type SqlResult } from "../src/db/executor";
import { ROOT } from "./build";

type Statement = ReturnType<InstanceType<typeof Database>["prepare"]>;

/** Prepared statements kept per database; the host runs a few dozen distinct ones, so this bound is never reached in practice. */
const STATEMENT_CACHE_SIZE = 512;

export interface EmbeddedDb {
  /** What the Worker's LIBSQL binding is served from (local/db-listener.ts). */
  executor: SqlExecutor;
  /** Rows as objects keyed by column (inspection and seeding, not the host's own queries). */
  rows<T = Record<string, unknown>>(sql: string, args?: unknown[]): T[];
  close(): void;
}

function dbError(err: unknown): DbError {
  const e = err as { message?: string; code?: string };
  return new DbError(e.message ?? String(err), e.code, { cause: err });
}

/**
 * The embedded database: a libSQL file (or `:memory:`) opened in this Node
 * process with libSQL's native driver, migrated. Statements are prepared once
 * and reused, and rows come back as arrays, which is what the Worker's
 * sqlite-proxy driver wants: measured, a prepared-and-cached query costs a
 * fifth of what @libsql/client's prepare-per-call execute does. The
 * production database is Turso/sqld, reached from the Worker over HTTP.
 */
export async function openEmbeddedDb(url: string): Promise<EmbeddedDb> {
  const path = url === ":memory:" ? ":memory:" : url.replace(/^file:/, "");
  const db = new Database(path);
  if (path !== ":memory:") {
    // WAL lets readers proceed while a batch writes; NORMAL syncs at checkpoints,
    // not on every commit: a crash of this process loses nothing, a power cut
    // may lose the last commits.
    db.exec("PRAGMA journal_mode = WAL");
    db.exec("PRAGMA synchronous = NORMAL");
  }

  const cache = new Map<string, { stmt: Statement; reader: boolean }>();
  function prepared(sql: string) {
    let entry = cache.get(sql);
    if (!entry) {
      if (cache.size >= STATEMENT_CACHE_SIZE) cache.clear();
      const stmt = db.prepare(sql);
      const reader = stmt.reader;
      if (reader) stmt.raw(true);
      entry = { stmt, reader };
      cache.set(sql, entry);
    }
    return entry;
  }
  // Synchronous: one query or batch runs to its end before the next request is read.
  function run(q: SqlQuery): SqlResult {
    const { stmt, reader } = prepared(q.sql);
    if (!reader) {
      stmt.run(q.params);
      return { rows: [] };
    }
    const rows = stmt.all(q.params) as unknown[][];
    if (q.method === "run") return { rows: [] };
    // sqlite-proxy expects a single row (or undefined) for `get`.
    return q.method === "get" ? { rows: rows[0] as unknown[] } : { rows };
  }
  const inTransaction = db.transaction((qs: SqlQuery[]) => qs.map(run));

  const executor: SqlExecutor = {
    async query(q) {
      try {
        return run(q);
      } catch (err) {
        throw dbError(err);
      }
    },
    async batch(qs) {
      try {
        // BEGIN IMMEDIATE: the batch takes the write lock up front, as a libSQL "write" batch does.
        return inTransaction.immediate(qs);
      } catch (err) {
        throw dbError(err);
      }
    },
  };

  await migrate(
    createDb(executor),
    async (queries) => db.transaction(() => queries.forEach((q) => db.exec(q))).immediate(),
    { migrationsFolder: join(ROOT, "migrations") },
  );
  return {
    executor,
    rows: <T>(sql: string, args: unknown[] = []) => db.prepare(sql).all(args) as T[],
    close: () => {
      // A stopped host's file holds everything: a backup that copies host.db alone (as README names it) is whole. Best
      // effort: a checkpoint that cannot run now leaves the WAL, which the next open replays.
      if (path !== ":memory:") {
        try {
          db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
        } catch (err) {
          console.warn(`host.db: its write-ahead log was not folded in at stop (${(err as Error).message}); the next start replays it`);
        }
      }
      db.close();
    },
  };
}
