import type { Context } from "hono";
import { dbOf } from "../db/connect";
import { dbErrorOf } from "../db/executor";
import { appliedMigration, newestMigration } from "../db/schema-version";
import { configOf } from "../env";
import { opaqueFetchFailureBehind } from "../lib/opaque-fetch-failure";
import type { AppEnv } from "./app-env";

/**
 * `GET /readyz`: whether this deployment can serve, for an uptime check or a deploy script (`/healthz` only says
 * the Worker runs). Its configuration parses, the database answers, and it is migrated at least to the migration
 * this Worker was built with. A configuration or database the operator must fix throws, and `onError` answers
 * 503 `misconfigured` / `database_not_migrated` naming the step, as it does on every route; no secret is named.
 */
export async function readiness(c: Context<AppEnv>): Promise<Response> {
  const config = configOf(c.env);
  let applied;
  try {
    applied = await appliedMigration(dbOf(c.env));
  } catch (err) {
    const db = dbErrorOf(err);
    if (!db || db.notMigrated || db.credentialsRefused) throw err;
    // A LIBSQL_URL whose host does not resolve fails with workerd's opaque error: its known causes, not "no answer".
    const why = db.unanswered ? (opaqueFetchFailureBehind(db) ?? "no answer within DB_QUERY_TIMEOUT_MS, or the connection was lost") : (db.code ?? "it answered with an error");
    console.error(`GET /readyz: the database is unavailable (${why})`);
    return c.json({ error: { code: "database_unavailable", message: `the database is unavailable (${why})` } }, 503);
  }
  if (!applied || applied.when < newestMigration.when) {
    const message = `the database is not migrated to this version (its newest migration is ${applied?.tag ?? "none"}, this version needs ${newestMigration.tag}): apply migrations/ with LIBSQL_URL=… LIBSQL_AUTH_TOKEN=… npm run db:migrate`;
    return c.json({ error: { code: "database_not_migrated", message } }, 503);
  }
  return c.json({ ok: true, host_version: config.HOST_VERSION, migration: applied.tag });
}
