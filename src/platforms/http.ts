import { withOpaqueCauses } from "../lib/opaque-fetch-failure";
import type { ApiFailure, ApiResult } from "./types";
import { sourceFailureOf, UploadForm } from "./upload";

export interface HttpReply {
  status: number;
  headers: Headers;
  /** The body parsed as JSON, or null when it is not JSON. */
  json: unknown;
}

/**
 * One call to a platform's API. Network errors and timeouts come back as a
 * transient failure whose message never names the URL: platform URLs carry
 * credentials (Telegram's bot token, Discord's interaction token). A request
 * given as a function is made anew for a 307/308 redirect, so a streamed
 * upload is sent again there (without its credential when the redirect leaves the origin); a file that could not be read from storage is
 * said to be that, not the platform's fault.
 */
export async function callPlatform(url: string, init: RequestInit | (() => RequestInit), timeoutMs: number): Promise<ApiResult<HttpReply>> {
  const signal = AbortSignal.timeout(timeoutMs);
  const make = typeof init === "function" ? init : () => init;
  let res: Response;
  let sent: RequestInit | undefined;
  try {
    let crossedOrigin = false;
    for (let hops = 0; ; hops++) {
      sent = make();
      // As fetch does for the redirects it follows: the credential stays with the origin it was meant for.
      if (crossedOrigin) sent = { ...sent, headers: withoutCredentials(sent.headers) };
      const streamed = sent.body instanceof ReadableStream;
      res = await fetch(url, { ...sent, signal, ...(streamed ? { redirect: "manual" as const } : {}) });
      const location = res.headers.get("location");
      if (!streamed || (res.status !== 307 && res.status !== 308) || !location || hops >= 5 || typeof init !== "function") break;
      await res.body?.cancel();
      const next = new URL(location, url);
      crossedOrigin ||= next.origin !== new URL(url).origin;
      url = next.toString();
    }
  } catch (err) {
    const unreadable = sourceFailureOf(sent?.body);
    if (unreadable) return { ok: false, failure: { kind: unreadable.final ? "permanent" : "transient", status: null, code: "artifact_unavailable", message: unreadable.message } };
    return unanswered(err, timeoutMs);
  }
  let text: string;
  try {
    text = await res.text();
  } catch (err) {
    // The answer broke off after its status: what the platform did is as unknown as with no answer at all.
    return unanswered(err, timeoutMs);
  }
  let json: unknown = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  return { ok: true, value: { status: res.status, headers: res.headers, json } };
}

function withoutCredentials(headers: HeadersInit | undefined): Headers {
  const out = new Headers(headers);
  out.delete("authorization");
  out.delete("cookie");
  return out;
}

/**
 * A failure whose call is safe to make again even if it took effect: an edit (the same text twice shows once), or a
 * step before anything is shown in the chat (a file's upload before it is posted). Retried like any failure.
 */
export function repeatable<T>(res: { ok: false; failure: ApiFailure }): ApiResult<T> {
  return { ok: false, failure: { ...res.failure, maybeApplied: false } };
}

/** No (whole) answer came: the request may have arrived and taken effect all the same (a refused connection looks the same). */
function unanswered(err: unknown, timeoutMs: number): ApiResult<never> {
  const timedOut = (err as Error).name === "TimeoutError" || (err as Error).name === "AbortError";
  // workerd's opaque failure says its known causes (it names no URL, so no credential either).
  const message = timedOut ? `no answer within ${timeoutMs} ms` : withOpaqueCauses("the platform could not be reached, or the connection was lost before its answer", err);
  return { ok: false, failure: { kind: "transient", status: null, code: timedOut ? "timeout" : "network_error", message, maybeApplied: true } };
}

/**
 * A platform call's request: JSON parameters, a multipart upload (its file streamed, a fresh body per call) or
 * form-encoded parameters (the methods that take no JSON).
 */
export function requestInit(method: string, params: Record<string, unknown> | UploadForm | URLSearchParams, headers: Record<string, string> = {}): RequestInit {
  if (params instanceof UploadForm) {
    const { body, contentType } = params.body();
    return { method, headers: { ...headers, "content-type": contentType }, body };
  }
  if (params instanceof URLSearchParams) return { method, headers: { ...headers, "content-type": "application/x-www-form-urlencoded" }, body: params.toString() };
  return { method, headers: { ...headers, "content-type": "application/json; charset=utf-8" }, body: JSON.stringify(params) };
}

export { retryAfterHeaderMs } from "../lib/retry-after";

/**
 * A 5xx after which the platform may have done what was asked: 500 (it failed
 * partway) and 504 (a gateway stopped waiting, as a timeout does). 502 and
 * 503 say the request never got to be served.
 */
export const mayHaveApplied = (status: number) => status === 500 || status === 504;

/** The failure for a status no platform-specific rule claimed. */
export function failureOfStatus(status: number, code: string, message: string, retryAfterMs?: number): ApiFailure {
  if (status === 429) return { kind: "rate_limited", status, code, message, retryAfterMs };
  if (status >= 500) return { kind: "transient", status, code, message, retryAfterMs, ...(mayHaveApplied(status) ? { maybeApplied: true } : {}) };
  return { kind: "permanent", status, code, message };
}

export const asRecord = (v: unknown): Record<string, unknown> => (v && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : {});
