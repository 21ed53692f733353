import type { MiddlewareHandler } from "hono";
import { bodyLimit } from "hono/body-limit";
import { drainBody } from "../lib/drain";
import { HostError } from "../lib/errors";

const tooLarge = (maxSize: number) => new HostError(413, "payload_too_large", `request body exceeds ${maxSize} bytes`);

/**
 * Refuse bodies over `maxSize` bytes with 413, never holding more than that:
 * a body declared too large is drained unread first (so the client gets the
 * 413, not a reset), unless `drain` is false (callers that are never
 * legitimately that large, such as platform webhooks, which are not
 * authenticated before their body is read); one that only turns out too
 * large is cut by hono's counting limit.
 */
export function limitBody(maxSize: number, opts: { drain?: boolean } = {}): MiddlewareHandler {
  const counted = bodyLimit({
    maxSize,
    onError: () => {
      throw tooLarge(maxSize);
    },
  });
  return async function limitBody(c, next) {
    if (Number(c.req.header("content-length") ?? NaN) > maxSize) {
      if (opts.drain !== false) await drainBody(c.req.raw);
      throw tooLarge(maxSize);
    }
    return counted(c, next);
  };
}
