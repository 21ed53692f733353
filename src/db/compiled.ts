import { fillPlaceholders, is, sql, type Placeholder } from "drizzle-orm";
import { SQLitePreparedQuery } from "drizzle-orm/sqlite-core";
import type { Db } from "./client";

/**
 * What drizzle's `db.batch` asks of each item: `_prepare()`, then
 * `getQuery()` and `mapResult()` on what that returns. Query builders and
 * `db.run(sql)` both answer it.
 */
interface Batchable {
  _prepare(): Prepared;
}
interface Prepared {
  getQuery(): { sql: string; params: unknown[]; method: string };
  mapResult(response: unknown, isFromBatch?: boolean): unknown;
}

/**
 * A compiled statement with its values bound. Goes into `db.batch` /
 * `batchAll` like any drizzle query, or runs alone with `execute()`.
 */
export class BoundStatement<R> {
  /** Type only: what drizzle's batch() reads to type this item's result. */
  declare readonly _: { readonly dialect: "sqlite"; readonly result: R };

  constructor(
    private readonly db: Db,
    private readonly prepared: Prepared,
    private readonly query: { sql: string; params: unknown[]; method: string },
    private readonly values: Record<string, unknown>,
  ) {}

  /** Runs alone: a query builder's statement as a single query (no write transaction), db.run(sql) as a batch of one. */
  async execute(): Promise<R> {
    // A prepared builder query runs with its placeholders filled and maps its result to R itself.
    if (is(this.prepared, SQLitePreparedQuery)) return (await this.prepared.execute(this.values)) as R;
    const [result] = await this.db.batch([this]);
    return result;
  }

  /** @internal drizzle's batch contract. */
  _prepare(): this {
    return this;
  }

  /** @internal drizzle's batch contract. */
  getQuery() {
    return { sql: this.query.sql, params: fillPlaceholders(this.query.params, this.values), method: this.query.method };
  }

  /** @internal drizzle's batch contract. */
  mapResult(response: unknown, isFromBatch?: boolean): unknown {
    return this.prepared.mapResult(response, isFromBatch);
  }
}

/** The result type of a compiled statement. */
export type ResultOf<S extends (db: Db, values: Record<string, unknown>) => BoundStatement<unknown>> = ReturnType<S> extends BoundStatement<infer R> ? R : never;

/** A named placeholder, filled from the values a compiled statement is bound with. */
export const param = (name: string): Placeholder => sql.placeholder(name);

/**
 * A statement whose SQL drizzle builds once per database handle; each use
 * only binds values to its placeholders (`param(name)`). Building SQL is the
 * host's largest CPU cost per event (measured: 40–560 µs a statement), so the
 * statements every event runs are compiled this way. Values are checked by the
 * typed functions that wrap each statement, not here.
 */
export function compiled<Q extends PromiseLike<unknown>>(build: (db: Db) => Q) {
  const byDb = new WeakMap<Db, { prepared: Prepared; query: ReturnType<Prepared["getQuery"]> }>();
  return (db: Db, values: Record<string, unknown>): BoundStatement<Awaited<Q>> => {
    let entry = byDb.get(db);
    if (!entry) {
      // Every drizzle query builder and db.run(sql) implements _prepare() (Batchable).
      const prepared = (build(db) as unknown as Batchable)._prepare();
      entry = { prepared, query: prepared.getQuery() };
      byDb.set(db, entry);
    }
    return new BoundStatement<Awaited<Q>>(db, entry.prepared, entry.query, values);
  };
}
