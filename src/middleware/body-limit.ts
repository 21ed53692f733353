import type { MiddlewareHandler } from "hono";
import { readCapped } from "../artifacts/read-capped";
import { drainBody } from "../lib/drain";
import { HostError } from "../lib/errors";

const tooLarge = (maxSize: number) => new HostError(413, "payload_too_large", `request body exceeds ${maxSize} bytes`);

/**
 * Refuse bodies over `maxSize` bytes with 413, never holding more than that:
 * a body declared too large is drained unread first (so the client gets the
 * 413, not a reset), unless `drain` is false (callers that are never
 * legitimately that large, such as platform webhooks, which are not
 * authenticated before their body is read). One without a declared length
 * (chunked) is counted as it is read, and once it passes `maxSize` the rest is
 * drained within the same bounds (or, without `drain`, left unread) before the 413.
 */
export function limitBody(maxSize: number, opts: { drain?: boolean } = {}): MiddlewareHandler {
  return async function limitBody(c, next) {
    const request = c.req.raw;
    const declared = request.headers.get("content-length");
    if (Number(declared ?? NaN) > maxSize) {
      if (opts.drain !== false) await drainBody(request);
      throw tooLarge(maxSize);
    }
    if (!request.body || (declared !== null && !request.headers.has("transfer-encoding"))) return next();
    const body = await readCapped(request, maxSize, { drainOverflow: opts.drain !== false });
    if (body === "too_large") throw tooLarge(maxSize);
    c.req.raw = new Request(request, { body });
    return next();
  };
}
