import type { Context, ErrorHandler, Handler } from "hono";
import type { AppEnv } from "../routes/app-env";
import { HTTPException } from "hono/http-exception";
import { drainBody } from "../lib/drain";
import { HostError } from "../lib/errors";
import { SealedSecretError } from "../lib/secret-box";
import { ConfigError } from "../lib/config-error";
import { loggedError } from "../lib/describe-error";
import { dbErrorOf } from "../db/executor";
import { ApiError, hostFault } from "../host-api/errors";
import { logRefusal } from "../host-api/decision-log";
import { BlobStoreUnavailable } from "../artifacts/blob-fault";

const INTEGRITY_REFUSALS: Record<string, { status: 404 | 409; code: string; message: string }> = {
  agent_runner_not_registered: { status: 409, code: "conflict", message: "the agent's runner is not registered (its service was deleted or refreshed meanwhile)" },
  runner_in_use: { status: 409, code: "conflict", message: "an agent runs on a runner this would remove (it was created meanwhile): move or delete it first" },
  binding_agent_missing: { status: 404, code: "not_found", message: "the agent was deleted meanwhile" },
  agent_grant_not_registered: { status: 409, code: "conflict", message: "the agent's resource_policy grants a model, tool or knowledge base that is not registered (it was deleted meanwhile)" },
  resource_granted: { status: 409, code: "conflict", message: "an agent grants this resource (it was granted meanwhile): remove it from the agent's resource_policy first" },
  agent_config_incomplete: { status: 409, code: "conflict", message: "the agent's runner_config lacks a field its runner requires (its manifest was refreshed meanwhile): give the field and save again" },
  runner_config_required: { status: 409, code: "conflict", message: "the manifest requires a runner_config field an agent lacks (the agent was saved meanwhile): give the agent the field first" },
};

/**
 * A deployment step skipped or done wrong (README "Production"): nothing is served until the operator acts, and the
 * answer says what to do, where the operator's first request sees it, not only in `wrangler tail`.
 */
function operatorFault(err: unknown): { code: "misconfigured" | "database_not_migrated"; message: string } | null {
  if (err instanceof ConfigError) return { code: "misconfigured", message: err.message };
  const db = dbErrorOf(err);
  if (db?.notMigrated) {
    const reason = /\bno such (table|column): [\w.]+/.exec(db.message)?.[0];
    return { code: "database_not_migrated", message: `the database is not migrated to this version (${reason}): apply migrations/ with LIBSQL_URL=… LIBSQL_AUTH_TOKEN=… npm run db:migrate` };
  }
  if (db?.credentialsRefused) {
    return { code: "misconfigured", message: `the host is misconfigured: LIBSQL_AUTH_TOKEN: the database refused it (HTTP ${db.httpStatus}): npx wrangler secret put LIBSQL_AUTH_TOKEN with a token of the database LIBSQL_URL names` };
  }
  return null;
}

/** The one error handler: every failure answers `{error: {code, message}}`. */
export const onError: ErrorHandler = (err, c) => {
  if (err instanceof HostError) return c.json(err.toBody(), err.status, { ...err.headers });
  if (err instanceof HTTPException) {
    // Hono's own validators throw these, e.g. for a body that is not JSON.
    const code = err.status === 400 ? "invalid_json" : err.status === 413 ? "payload_too_large" : "invalid_request";
    return c.json({ error: { code, message: err.message || "bad request" } }, err.status);
  }
  // A write the database refused because a concurrent one changed what the route had checked (migrations 0008, 0010, 0011).
  const refused = INTEGRITY_REFUSALS[dbErrorOf(err)?.integrityRule ?? ""];
  if (refused) return c.json({ error: { code: refused.code, message: refused.message } }, refused.status);
  const fault = operatorFault(err);
  if (fault) {
    console.error(`${c.req.method} ${new URL(c.req.url).pathname}: ${fault.message}`);
    return c.json({ error: fault }, 503);
  }
  // R2 failed or did not answer in time (artifacts/blob-fault.ts): storage's trouble, not the request's, and sent again
  // it is served (an event's attachments are stored before it is recorded; a platform's redelivery stores the raw
  // payload). The answer names the kind of call only: R2's words and the key go to the log.
  if (err instanceof BlobStoreUnavailable) {
    console.error(`${c.req.method} ${new URL(c.req.url).pathname}: ${loggedError(err)}`);
    return c.json({ error: { code: "storage_unavailable", message: `storage ${err.said}; try again` } }, 503);
  }
  // A stored credential the configured keys cannot open: the operator's to fix (SECRETS_KEY, SECRETS_KEY_PREVIOUS).
  if (err instanceof SealedSecretError) {
    console.error(`${c.req.method} ${new URL(c.req.url).pathname}: ${err.message}`);
    return c.json({ error: { code: "secrets_unavailable", message: `${err.message}; check SECRETS_KEY and SECRETS_KEY_PREVIOUS` } }, 500);
  }
  console.error(`unhandled error on ${c.req.method} ${new URL(c.req.url).pathname}: ${loggedError(err)}`);
  return c.json({ error: { code: "internal", message: "internal error" } }, 500);
};

/**
 * A run-token route (the Host API, uploads) asked with a method it does not take: 405 with `Allow`, its body drained
 * unread as any refusal's, answered as every answer there is (PROTOCOL §8 `{ok: false, error}`), so a runner's client
 * reads it as it reads the others.
 */
export const methodNotAllowed = (allow: string): Handler =>
  async function methodNotAllowed(c) {
    await drainBody(c.req.raw);
    c.header("allow", allow);
    const err = new ApiError("invalid_argument", `${new URL(c.req.url).pathname} takes ${allow}, not ${c.req.method}`, { status: 405, details: { allow } });
    return c.json(err.toBody(), 405);
  };

/**
 * A run-token route whose call into the run's Durable Object throws (the object reset or overloaded, or a body over
 * the 32 MiB such a call carries) answers as every answer there does: a retryable 500 `runtime_error` in the §8
 * shape, logged as a decision, not `onError`'s `{error}` a runner's client cannot read. A body not yet read is drained,
 * as any refusal's, so the client reads the answer instead of a reset.
 */
export const inHostApiShape = (action: string | null, handler: (c: Context<AppEnv>, runId: string) => Promise<Response>) =>
  async function inHostApiShape(c: Context<AppEnv>): Promise<Response> {
    const runId = c.req.param("runId") ?? "";
    try {
      return await handler(c, runId);
    } catch (err) {
      const fault = hostFault(runId, action, err);
      logRefusal(runId, null, fault.code, fault.status, action);
      await drainBody(c.req.raw);
      return c.json(fault.toBody(), 500);
    }
  };
