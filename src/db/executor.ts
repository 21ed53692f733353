import type { Client, InArgs, InStatement, ResultSet } from "@libsql/client";
import { namingOpaqueFailure } from "../lib/opaque-fetch-failure";

/**
 * The transport under drizzle's sqlite-proxy driver. One interface, two
 * implementations: a libSQL client (embedded file, `:memory:`, or Turso over
 * HTTP) and the Worker-side service binding that reaches the embedded file
 * hosted by the local Node process. Every environment runs the same drizzle
 * queries through the same driver.
 */
export type SqlMethod = "run" | "all" | "values" | "get";
export interface SqlQuery {
  sql: string;
  params: unknown[];
  method: SqlMethod;
}
export interface SqlResult {
  rows: unknown[];
}
export interface SqlExecutor {
  query(q: SqlQuery): Promise<SqlResult>;
  batch(qs: SqlQuery[]): Promise<SqlResult[]>;
}

/** A database failure that keeps the SQLite error code (e.g. SQLITE_CONSTRAINT_PRIMARYKEY). */
export class DbError extends Error {
  override readonly name = "DbError";
  /**
   * No answer came (a timeout, a lost connection): the write may have been applied all the same. What a
   * failed write would leave unnamed (a blob) is then kept, as a row may name it.
   */
  readonly unanswered: boolean;
  /** The HTTP status of a database server that refused the request itself (not a statement of it). */
  readonly httpStatus: number | undefined;
  constructor(
    message: string,
    readonly code: string | undefined,
    options?: { cause?: unknown; unanswered?: boolean; httpStatus?: number },
  ) {
    super(message, options);
    this.unanswered = options?.unanswered ?? false;
    this.httpStatus = options?.httpStatus;
  }
  /** A table or column this Worker uses is missing: migrations/ were not (all) applied to the database. */
  get notMigrated(): boolean {
    return /\bno such (table|column)\b/.test(this.message);
  }
  /** Turso/sqld refused the Worker's credentials (LIBSQL_AUTH_TOKEN missing, wrong or expired). */
  get credentialsRefused(): boolean {
    return this.httpStatus === 401 || this.httpStatus === 403;
  }
  get isConstraintViolation(): boolean {
    return (this.code ?? "").startsWith("SQLITE_CONSTRAINT") || /UNIQUE constraint failed/.test(this.message);
  }
  /** The rule of migration 0008's integrity triggers that refused the write (`runner_in_use`, ...), or null. */
  get integrityRule(): string | null {
    return /integrity: ([a-z_]+)/.exec(this.message)?.[1] ?? null;
  }
}

/** The database's own error in `err`, or in its causes: drizzle wraps a failed single query (DrizzleQueryError). */
export function dbErrorOf(err: unknown): DbError | null {
  let e = err;
  for (let depth = 0; e && depth < 5; depth++, e = (e as { cause?: unknown }).cause) if (e instanceof DbError) return e;
  return null;
}

/** Whether a failed write may have been applied: always, unless the database answered that it was not. */
export const mayHaveApplied = (err: unknown): boolean => dbErrorOf(err)?.unanswered ?? true;

function toRows(rs: ResultSet, method: SqlMethod): SqlResult {
  if (method === "run") return { rows: [] };
  const width = rs.columns.length;
  const rows = rs.rows.map((row) => {
    const values: unknown[] = new Array(width);
    for (let i = 0; i < width; i++) values[i] = row[i];
    return values;
  });
  // sqlite-proxy expects a single row (or undefined) for `get`.
  return method === "get" ? { rows: rows[0] as unknown[] } : { rows };
}

function toStatement(q: SqlQuery): InStatement {
  // Params come from drizzle (strings, numbers, null) or from JSON over the
  // binding, so they are always values libSQL accepts.
  return { sql: q.sql, args: q.params as InArgs };
}

function wrap(err: unknown): DbError {
  if (err instanceof DbError) return err;
  const e = err as { message?: string; code?: unknown; extendedCode?: unknown; cause?: { code?: unknown; status?: unknown } };
  // Only a string names a database error: a DOMException's `code` (a fetch timed out: 23) is a number.
  const code = [e.extendedCode, e.code, e.cause?.code].find((c): c is string => typeof c === "string");
  // Only SQLite's own refusal says the write was not applied; a failed fetch (no code), an HTTP status from
  // whatever stands in front of the database (SERVER_ERROR: a 504 from a proxy, say) or a garbled answer does not.
  // @libsql/client keeps the server's HTTP status on the transport error it wraps (SERVER_ERROR).
  const httpStatus = typeof e.cause?.status === "number" ? e.cause.status : undefined;
  return new DbError(onceCoded(e.message ?? String(err)), code, { cause: err, unanswered: !code?.startsWith("SQLITE_"), httpStatus });
}

/** @libsql/client prefixes a failed batch statement's message with its code twice ("SQLITE_ERROR: SQLITE_ERROR: no such table"): once is enough. */
function onceCoded(message: string): string {
  return message.replace(/^([A-Z][A-Z0-9_]*: )\1+/, "$1");
}

export function libsqlExecutor(client: Client): SqlExecutor {
  return {
    async query(q) {
      try {
        return toRows(await client.execute(toStatement(q)), q.method);
      } catch (err) {
        throw wrap(err);
      }
    },
    async batch(qs) {
      try {
        const results = await client.batch(qs.map(toStatement), "write");
        return results.map((rs, i) => toRows(rs, qs[i].method));
      } catch (err) {
        throw wrap(err);
      }
    },
  };
}

/** Worker side of the local embedded database: JSON over a service binding, each round trip bounded by `timeoutMs`. */
export function bindingExecutor(binding: Fetcher, token = "", timeoutMs?: number): SqlExecutor {
  async function post<T>(path: string, body: unknown): Promise<T> {
    let payload: { ok: boolean; data?: T; error?: { message: string; code?: string } };
    try {
      const res = await binding.fetch(`http://libsql${path}`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
        body: JSON.stringify(body),
        signal: timeoutMs ? AbortSignal.timeout(timeoutMs) : undefined,
      });
      payload = await res.json();
    } catch (err) {
      throw new DbError(`database unreachable: ${(err as Error).message}`, undefined, { cause: err, unanswered: true });
    }
    if (!payload.ok) throw new DbError(payload.error?.message ?? "database error", payload.error?.code);
    return payload.data as T;
  }
  return {
    query: (q) => post<SqlResult>("/query", q),
    batch: (qs) => post<SqlResult[]>("/batch", { queries: qs }),
  };
}

/** Node side of the binding: answer one request of the JSON protocol above. */
export async function serveExecutor(executor: SqlExecutor, path: string, body: unknown): Promise<{ status: number; body: unknown }> {
  try {
    if (path === "/query") return { status: 200, body: { ok: true, data: await executor.query(body as SqlQuery) } };
    if (path === "/batch") return { status: 200, body: { ok: true, data: await executor.batch((body as { queries: SqlQuery[] }).queries) } };
    return { status: 404, body: { ok: false, error: { message: `unknown path ${path}` } } };
  } catch (err) {
    const e = wrap(err);
    return { status: 500, body: { ok: false, error: { message: e.message, code: e.code } } };
  }
}

/**
 * A fetch whose every request ends after `timeoutMs` (for the libSQL HTTP client). The client passes a failed
 * fetch's error on as it is: workerd's opaque one is given its known causes first (a LIBSQL_URL whose host does not
 * resolve would otherwise read as "internal error; reference = …" wherever a database error is said).
 */
export function fetchWithTimeout(timeoutMs: number): typeof fetch {
  return (input, init) =>
    fetch(input, { ...init, signal: init?.signal ? AbortSignal.any([init.signal, AbortSignal.timeout(timeoutMs)]) : AbortSignal.timeout(timeoutMs) }).catch((err: unknown) => {
      throw namingOpaqueFailure(err);
    });
}
