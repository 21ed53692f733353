import { DrizzleQueryError } from "drizzle-orm/errors";

/**
 * An error's message fit for a log line or a record. drizzle puts a failed
 * query's bound values in its message, and those may be credentials (stored
 * as given without SECRETS_KEY), state values or users' words: only the
 * statement and the database's own reason are kept.
 */
export function describeError(err: unknown): string {
  if (err instanceof DrizzleQueryError) {
    const reason = err.cause instanceof Error ? err.cause.message : "no reason given";
    return `query failed (${err.query.slice(0, 200)}): ${reason}`;
  }
  return err instanceof Error ? err.message : String(err);
}
