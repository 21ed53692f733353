import type { MiddlewareHandler } from "hono";
import { readCapped } from "../artifacts/read-capped";
import { drainBody } from "../lib/drain";
import { HostError } from "../lib/errors";

/**
 * Bodies of the admin-token routes (under /v1/admin, and the operator's run cancel) are small JSON documents; a larger
 * one is refused before it is held.
 */
export const ADMIN_BODY_MAX_BYTES = 1024 * 1024;

/**
 * The length a request's body is held to, or null when none is: no Content-Length, or one beside Transfer-Encoding,
 * whose chunked framing is what the body is read by (RFC 9112 §6.3), so its Content-Length promises nothing.
 */
export function boundLength(request: Request): number | null {
  const declared = request.headers.get("content-length");
  return declared === null || request.headers.has("transfer-encoding") ? null : Number(declared);
}

export const tooLarge = (maxSize: number) => new HostError(413, "payload_too_large", `request body exceeds ${maxSize} bytes`);

/**
 * Refuse bodies over `maxSize` bytes with 413, never holding more than that:
 * a body declared too large is drained unread first (so the client gets the
 * 413, not a reset). One without a declared length (chunked) is counted as it
 * is read, and once it passes `maxSize` the rest is drained within the same
 * bounds before the 413. (Platform webhooks, read before they are verified,
 * cap their bodies themselves without draining: routes/webhooks.ts.)
 */
export function limitBody(maxSize: number): MiddlewareHandler {
  return async function limitBody(c, next) {
    const request = c.req.raw;
    const declared = request.headers.get("content-length");
    if (Number(declared ?? NaN) > maxSize) {
      await drainBody(request);
      throw tooLarge(maxSize);
    }
    if (!request.body || boundLength(request) !== null) return next();
    const body = await readCapped(request, maxSize, { drainOverflow: true });
    if (body === "too_large") throw tooLarge(maxSize);
    c.req.raw = new Request(request, { body });
    return next();
  };
}
