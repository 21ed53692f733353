import { createClient, type Client } from "@libsql/client/web";
import { configOf, databaseProblems, type Env } from "../env";
import { ConfigError } from "../lib/config-error";
import { secretBox } from "../lib/secret-box";
import { createDb, type Db } from "./client";
import { bindingExecutor, fetchWithTimeout, libsqlExecutor } from "./executor";

const cache = new WeakMap<object, Db>();

/**
 * The database for this environment, made on first use (never at import
 * time): the local embedded file through the LIBSQL service binding, or
 * Turso/sqld over HTTP in production.
 */
export function dbOf(env: Env): Db {
  let db = cache.get(env);
  if (db) return db;
  const config = configOf(env);
  const secrets = secretBox(config.SECRETS_KEY, config.SECRETS_KEY_PREVIOUS);
  const timeoutMs = config.DB_QUERY_TIMEOUT_MS;
  if (env.LIBSQL) db = createDb(bindingExecutor(env.LIBSQL, env.LIBSQL_BINDING_TOKEN, timeoutMs), secrets);
  else if (env.LIBSQL_URL) db = createDb(libsqlExecutor(remoteClient(env.LIBSQL_URL, env.LIBSQL_AUTH_TOKEN, timeoutMs)), secrets);
  else throw new ConfigError(databaseProblems(env));
  cache.set(env, db);
  return db;
}

/**
 * The HTTP client for LIBSQL_URL. A URL it refuses is reported by its setting's name only: the client's
 * own message repeats the URL, and with it an `?authToken=` the URL may carry. A `ws://` / `wss://` URL (sqld and
 * Turso serve Hrana over HTTP on the same address) is reached over HTTP too: over a WebSocket the client would not
 * use our fetch, and a round trip would have no DB_QUERY_TIMEOUT_MS.
 */
function remoteClient(url: string, authToken: string | undefined, timeoutMs: number): Client {
  try {
    return createClient({ url: url.replace(/^ws(s?):/i, "http$1:"), authToken, fetch: fetchWithTimeout(timeoutMs) });
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    throw new ConfigError([`LIBSQL_URL: not a usable libSQL URL${typeof code === "string" ? ` (${code})` : ""}: expected libsql://<host> (Turso) or https://<host> (sqld), without quotes`]);
  }
}
