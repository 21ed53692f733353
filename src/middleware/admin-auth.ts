import type { MiddlewareHandler } from "hono";
import { configOf, type Env } from "../env";
import { secretsEqual } from "../lib/crypto";
import { drainBody } from "../lib/drain";
import { unauthorized } from "../lib/errors";

export function bearerToken(header: string | undefined): string | null {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header ?? "");
  return m ? m[1] : null;
}

/** Operator routes: the bearer must be ADMIN_TOKEN (digests compared in constant time). */
export function adminAuth(): MiddlewareHandler<{ Bindings: Env }> {
  return async function adminAuth(c, next) {
    const token = bearerToken(c.req.header("authorization"));
    const expected = configOf(c.env).ADMIN_TOKEN;
    if (!(await secretsEqual(token, expected))) {
      // Refused unread: drained (within its bounds), so the client reads the 401 instead of a reset.
      await drainBody(c.req.raw);
      throw unauthorized();
    }
    await next();
  };
}
