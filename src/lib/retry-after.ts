import { httpDateMs } from "./http-date";

/**
 * The wait an HTTP answer asks for, in milliseconds: a header in seconds (`Retry-After: 2.5`) or, for `Retry-After`,
 * an HTTP-date (./http-date.ts). Undefined when the header is absent or unreadable (a negative number, text that is
 * neither): a caller then waits its own backoff.
 */
export function retryAfterHeaderMs(headers: Headers, name = "retry-after", now = Date.now()): number | undefined {
  const value = headers.get(name)?.trim();
  if (!value) return undefined;
  if (/^\d+(\.\d+)?$/.test(value)) return secondsInMs(Number(value));
  // Only an HTTP-date's own forms: Date.parse reads "-5" or "about 5" as a day in 2001, a wait of 0 (a retry at once).
  const at = httpDateMs(value, now);
  return at === undefined ? undefined : Math.max(0, at - now);
}

/** `retry-after-ms` (OpenAI, Azure OpenAI), else `Retry-After`. */
export function retryAfterMs(headers: Headers): number | undefined {
  const ms = headers.get("retry-after-ms")?.trim();
  return ms && /^\d+(\.\d+)?$/.test(ms) ? Math.ceil(Number(ms)) : retryAfterHeaderMs(headers);
}

/**
 * Seconds (not negative) in whole milliseconds, rounded up past the float product's own error: 4.03 s is 4030 ms,
 * not the 4031 that ceil(4030.0000000000005) makes; 0.0015 s is 2 ms.
 */
function secondsInMs(seconds: number): number {
  return Math.ceil(Number((seconds * 1000).toPrecision(15)));
}

/**
 * A wait as it may be passed on or recorded: a whole number of milliseconds every reader's integer holds exactly, or
 * undefined. Past 2^53 − 1 ms (`Retry-After: 999…9` parses to Infinity, `1e20` seconds to 1e23) it is no wait anyone
 * keeps, and JSON would carry it as `null` or `1e+23`.
 */
export function exactWaitMs(ms: number | undefined): number | undefined {
  return ms !== undefined && Number.isSafeInteger(ms) ? ms : undefined;
}

/**
 * A wait a platform's JSON body names in seconds (Telegram's and Discord's `retry_after`, fractional), in whole
 * milliseconds rounded up; undefined for anything else (a negative number, not a number): no wait named, so the
 * caller's own backoff applies rather than a retry at once.
 */
export function secondsFieldMs(seconds: unknown): number | undefined {
  return typeof seconds === "number" && seconds >= 0 ? secondsInMs(seconds) : undefined;
}
