/**
 * The wait an HTTP answer asks for, in milliseconds: a header in seconds (`Retry-After: 2.5`) or, for `Retry-After`,
 * an HTTP date. Undefined when the header is absent or unreadable: a caller then waits its own backoff.
 */
export function retryAfterHeaderMs(headers: Headers, name = "retry-after", now = Date.now()): number | undefined {
  const value = headers.get(name)?.trim();
  if (!value) return undefined;
  if (/^\d+(\.\d+)?$/.test(value)) return Math.ceil(Number(value) * 1000);
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** `retry-after-ms` (OpenAI, Azure OpenAI), else `Retry-After`. */
export function retryAfterMs(headers: Headers): number | undefined {
  const ms = headers.get("retry-after-ms")?.trim();
  return ms && /^\d+(\.\d+)?$/.test(ms) ? Math.ceil(Number(ms)) : retryAfterHeaderMs(headers);
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
  return typeof seconds === "number" && seconds >= 0 ? Math.ceil(seconds * 1000) : undefined;
}
