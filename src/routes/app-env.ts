import { Hono } from "hono";
import type { Env } from "../env";
import { configOf } from "../env";

export type AppEnv = { Bindings: Env };
export const router = () => new Hono<AppEnv>();

/** Where runners call back: PUBLIC_URL when set, else the origin this request reached. */
export function publicBaseUrl(env: Env, requestUrl: string): string {
  return configOf(env).PUBLIC_URL ?? new URL(requestUrl).origin;
}
