import { Hono } from "hono";
import type { Env } from "../env";
import { configOf } from "../env";
import { InvalidCursorError } from "../lib/cursor";
import { badRequest } from "../lib/errors";

export type AppEnv = { Bindings: Env };
export const router = () => new Hono<AppEnv>();

/** Where runners call back: PUBLIC_URL when set, else the origin this request reached. */
export function publicBaseUrl(env: Env, requestUrl: string): string {
  return configOf(env).PUBLIC_URL ?? new URL(requestUrl).origin;
}

/** An opaque cursor from the caller: a malformed one is a 400, not a 500. */
export function decodeOr400<T>(decode: () => T): T {
  try {
    return decode();
  } catch (err) {
    if (err instanceof InvalidCursorError) throw badRequest(err.message);
    throw err;
  }
}
