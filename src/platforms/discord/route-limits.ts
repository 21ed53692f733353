/**
 * Discord's per-route rate limits, honoured before a call rather than only after a 429: an answer saying its bucket is
 * spent (`X-RateLimit-Remaining: 0`) holds the next call of that route until the bucket resets
 * (`X-RateLimit-Reset-After`, seconds, fractional). Routes Discord names as one bucket (`X-RateLimit-Bucket`) wait
 * together. Kept in memory by one reply's messenger: every 429 Discord answers counts toward its ban on clients that
 * keep getting them, and a reply of many parts would otherwise meet one per burst.
 */
import { retryAfterHeaderMs } from "../http";

export class RouteLimits {
  /** Each route's bucket as Discord named it; a route it has not named is a bucket of its own. */
  private readonly buckets = new Map<string, string>();
  /** When each spent bucket has room again (ms since the epoch). */
  private readonly resetAt = new Map<string, number>();

  /** `maxWaitMs`: a longer wait is not waited here (the call goes, and a 429 says how long; the retry loop waits). */
  constructor(private readonly maxWaitMs: number) {}

  /** Resolves once the route's bucket has room again. */
  async ready(route: string): Promise<void> {
    const wait = (this.resetAt.get(this.buckets.get(route) ?? route) ?? 0) - Date.now();
    if (wait > 0 && wait <= this.maxWaitMs) await new Promise((resolve) => setTimeout(resolve, wait));
  }

  /** What an answer on the route says of its bucket. */
  noted(route: string, headers: Headers): void {
    const named = headers.get("x-ratelimit-bucket");
    if (named) this.buckets.set(route, named);
    const bucket = named || (this.buckets.get(route) ?? route);
    const remaining = headers.get("x-ratelimit-remaining")?.trim();
    const resetAfterMs = retryAfterHeaderMs(headers, "x-ratelimit-reset-after");
    if (remaining === "0" && resetAfterMs !== undefined) this.resetAt.set(bucket, Date.now() + resetAfterMs);
    else if (remaining !== undefined) this.resetAt.delete(bucket);
  }
}
