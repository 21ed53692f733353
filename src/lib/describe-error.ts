import { DrizzleQueryError } from "drizzle-orm/errors";
import { loggedText } from "./log-text";

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
  const message = err instanceof Error ? err.message : String(err);
  // The same error after a Durable Object RPC: a plain Error with drizzle's message.
  const params = message.startsWith("Failed query:") ? message.indexOf("\nparams:") : -1;
  return params >= 0 ? `${message.slice(0, params)} (bound values left out)` : message;
}

/** Characters of an error's description a log line keeps: a failed query's statement (200) and its reason fit. */
export const LOGGED_ERROR_CHARS = 1000;

/**
 * describeError as a log line quotes it: an error's message may carry another party's words (a database's reason, an
 * upstream's answer), so it is escaped and cut as they are (loggedText), and never starts a line of its own.
 */
export const loggedError = (err: unknown): string => loggedText(describeError(err), LOGGED_ERROR_CHARS);
