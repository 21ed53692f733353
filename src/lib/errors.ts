import type { ContentfulStatusCode } from "hono/utils/http-status";

export type ErrorCode =
  | "invalid_json"
  | "invalid_request"
  | "unauthorized"
  | "forbidden"
  | "not_found"
  | "method_not_allowed"
  | "conflict"
  | "event_id_conflict"
  | "payload_too_large"
  | "unsupported_media_type"
  | "bad_gateway"
  | "platform_unavailable"
  | "attachment_unavailable"
  | "secrets_unavailable"
  | "internal";

/**
 * The one error type routes throw. `onError` turns it into
 * `{error: {code, message, details?}}` with its status; anything else is a 500
 * whose message never leaks internals.
 */
export class HostError extends Error {
  override readonly name = "HostError";
  /** Response headers the answer carries (Slack's `X-Slack-No-Retry` on a refusal a retry could not change). */
  readonly headers: Readonly<Record<string, string>>;
  constructor(
    readonly status: ContentfulStatusCode,
    readonly code: ErrorCode,
    message: string,
    readonly details?: unknown,
    options?: { cause?: unknown; headers?: Record<string, string> },
  ) {
    super(message, options);
    this.headers = options?.headers ?? {};
  }

  toBody(): { error: { code: string; message: string; details?: unknown } } {
    return { error: { code: this.code, message: this.message, ...(this.details === undefined ? {} : { details: this.details }) } };
  }
}

export const badRequest = (message: string, details?: unknown) => new HostError(400, "invalid_request", message, details);
export const unauthorized = (message = "missing or invalid bearer token") => new HostError(401, "unauthorized", message);
export const notFound = (message: string) => new HostError(404, "not_found", message);
export const conflict = (message: string, details?: unknown) => new HostError(409, "conflict", message, details);
