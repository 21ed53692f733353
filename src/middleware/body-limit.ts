import type { MiddlewareHandler } from "hono";
import { drainBody, drainReader } from "../lib/drain";
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
    const reader = request.body.getReader();
    const chunks: Uint8Array[] = [];
    let size = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.length;
      if (size > maxSize) {
        if (opts.drain !== false) await drainReader(reader);
        throw tooLarge(maxSize);
      }
      chunks.push(value);
    }
    const body = new Uint8Array(size);
    let at = 0;
    for (const chunk of chunks) {
      body.set(chunk, at);
      at += chunk.length;
    }
    c.req.raw = new Request(request, { body });
    return next();
  };
}
