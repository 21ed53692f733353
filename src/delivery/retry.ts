import type { ApiFailure, ApiResult } from "../platforms/types";

export interface RetryPolicy {
  maxAttempts: number;
  baseMs: number;
  /** A rate limit asking for a longer wait is given up on. */
  maxRetryAfterMs: number;
  /** False for calls that are not idempotent: an attempt that may have taken effect is not made again (it would post twice). */
  retryMaybeApplied?: boolean;
}

export interface AttemptOutcome<T> {
  attempt: number;
  result: ApiResult<T>;
  /** Set when another attempt follows, after this many milliseconds. */
  retryInMs: number | null;
}

/** How long to wait before the next attempt, or null when the failure is final. */
export function retryDelay(policy: RetryPolicy, failure: ApiFailure, attempt: number): number | null {
  // Not the platform failing: the same text goes again as plain text, at once, even past the bound (one attempt more at
  // most: a plain attempt is never refused for its formatting), so a formatting bug never loses an answer.
  if (failure.refusedFormatting && attempt <= policy.maxAttempts) return 0;
  if (failure.kind === "permanent" || attempt >= policy.maxAttempts) return null;
  if (failure.maybeApplied && policy.retryMaybeApplied === false) return null;
  const backoff = policy.baseMs * 2 ** (attempt - 1);
  // The platform's own wait wins for rate limits; a transient error waits at least the backoff.
  const wait = failure.kind === "rate_limited" ? (failure.retryAfterMs ?? backoff) : Math.max(backoff, failure.retryAfterMs ?? 0);
  return wait <= policy.maxRetryAfterMs ? wait : null;
}

/**
 * Call until success, a permanent failure or the attempt bound, waiting as the
 * platform asks (429 retry_after) or backing off exponentially. Every attempt
 * is reported to `onOutcome` (the EventLog record) before the wait.
 */
export async function withRetries<T>(
  policy: RetryPolicy,
  call: () => Promise<ApiResult<T>>,
  onOutcome: (o: AttemptOutcome<T>) => void,
  sleep: (ms: number) => Promise<void>,
): Promise<ApiResult<T>> {
  for (let attempt = 1; ; attempt++) {
    const result = await call();
    const retryInMs = result.ok ? null : retryDelay(policy, result.failure, attempt);
    onOutcome({ attempt, result, retryInMs });
    if (retryInMs === null) return result;
    await sleep(retryInMs);
  }
}
