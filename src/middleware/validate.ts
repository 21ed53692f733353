import { zValidator } from "@hono/zod-validator";
import type { MiddlewareHandler, ValidationTargets } from "hono";
import * as z from "zod";
import type { ZodType } from "zod";
import { HostError } from "../lib/errors";
import { formatZodIssues } from "../protocol/common";
import { compressedBodyRefusal } from "../lib/content-encoding";
import { drainBody } from "../lib/drain";
import { roundedIntegerAt, roundedIntegerMessage, withDigitsAsSent } from "../lib/exact-json";

function invalid(target: string, error: Parameters<typeof formatZodIssues>[0]): HostError {
  return new HostError(400, "invalid_request", `invalid ${target}: ${formatZodIssues(error)}`);
}

/** zod validation of params and query with the host's error shape. */
export function validate<T extends ZodType, Target extends keyof ValidationTargets>(target: Target, schema: T) {
  return zValidator(target, schema, (result) => {
    if (!result.success) throw invalid(target, result.error);
  });
}

/**
 * JSON bodies whatever their Content-Type (plain `curl -d` sends a form type):
 * a compressed body (Content-Encoding gzip…) is a 415, bytes that are not UTF-8 or malformed JSON are a 400 `invalid_json`, a schema violation a 400
 * `invalid_request` naming the fields. The parsed body is `c.get("body")`.
 * `exact`: the body's numbers are kept as sent (an event's free-form bags), so a whole number written past what the
 * parsed value can show (beyond 64 bits, read as a float) is a 400 too, as the value check refuses one within 64 bits.
 */
export function jsonBody<T extends ZodType>(schema: T, opts: { exact?: boolean } = {}): MiddlewareHandler<{ Variables: { body: z.output<T> } }> {
  return async function jsonBody(c, next) {
    const compressed = compressedBodyRefusal(c.req.raw.headers);
    if (compressed) {
      // Refused unread: drained (within its bounds), so a client still sending reads the 415 instead of a reset.
      await drainBody(c.req.raw);
      throw new HostError(415, "unsupported_media_type", compressed);
    }
    let text: string;
    try {
      // Fatal: bytes that are not UTF-8 are refused, not stored with U+FFFD in their place.
      text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(await c.req.arrayBuffer());
    } catch {
      throw new HostError(400, "invalid_json", "request body is not valid UTF-8");
    }
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch {
      throw new HostError(400, "invalid_json", "request body is not valid JSON");
    }
    const parsed = schema.safeParse(raw);
    if (!parsed.success) throw invalid("body", opts.exact ? { issues: withDigitsAsSent(parsed.error.issues, text) } : parsed.error);
    // Only a run of 16 digits can be one: most bodies skip the second parse.
    const rounded = opts.exact && /\d{16}/.test(text) ? roundedIntegerAt(text, []) : null;
    if (rounded) throw new HostError(400, "invalid_request", `invalid body: ${roundedIntegerMessage(rounded)}`);
    c.set("body", parsed.data);
    await next();
  };
}

const NoFields = z.strictObject({});

/**
 * A route that takes no body (a refresh): none, or `{}` (what many clients send by default). Anything else is refused
 * as a body would be (400 `invalid_json` or `invalid_request` naming its fields), never silently ignored.
 */
export function noBody(): MiddlewareHandler {
  const empty = jsonBody(NoFields);
  // Hono keeps the bytes read: jsonBody reads them again from its cache.
  return async (c, next) => ((await c.req.arrayBuffer()).byteLength === 0 ? next() : empty(c, next));
}
