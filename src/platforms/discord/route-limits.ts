/**
 * Discord's rate limits, honoured before a call rather than only after a 429: an answer saying its bucket is
 * spent (`X-RateLimit-Remaining: 0`) holds the next call of that route until the bucket resets
 * (`X-RateLimit-Reset-After`, seconds, fractional). Routes Discord names as one bucket (`X-RateLimit-Bucket`) wait
 * together, each channel (guild, webhook) apart: the name leaves out the top-level resource a route names, which
 * Discord counts on its own, so one channel's spent bucket must not hold another's posts. Every 429 counts toward
 * Discord's ban on clients that keep getting them (10,000 401, 403 and 429 answers in 10 minutes), and a reply of
 * many parts would otherwise meet one per burst.
 *
 * An interaction's webhook has buckets of its own (its token is part of them): one reply's messenger keeps those.
 * Calls under the bot token (the channel or DM an answer continues in once its token expired) share the bot's
 * buckets and its global limit (50 a second; interaction webhooks are exempt) with every reply of the bot: those are
 * kept per bot for the whole isolate, so a global 429 one reply met holds the others' calls too.
 */
import { retryAfterHeaderMs } from "../http";
import { exactWaitMs, secondsFieldMs } from "../../lib/retry-after";

/** What a Discord answer asks to wait (ms): its body's `retry_after` (seconds, fractional), else its Retry-After header. */
export const retryAfterOf = (data: Record<string, unknown>, headers: Headers): number | undefined =>
  secondsFieldMs(data.retry_after) ?? retryAfterHeaderMs(headers);

/** Routes whose bucket names are remembered; past it the oldest are forgotten (Discord names them again). */
const MAX_ROUTES = 1_000;

/** The top-level resource a route names (`/channels/{id}`, `/guilds/{id}`, `/webhooks/{id}`), or "" for none. */
const majorOf = (route: string) => /\/(?:channels|guilds|webhooks)\/[^/]+/.exec(route)?.[0] ?? "";

export class RouteLimits {
  /** Each route's bucket as Discord named it; a route it has not named is a bucket of its own. */
  private readonly buckets = new Map<string, string>();
  /** When each spent bucket has room again (ms since the epoch). */
  private readonly resetAt = new Map<string, number>();
  /** When the global limit has room again (ms since the epoch). */
  private globalResetAt = 0;

  /**
   * Resolves once the route's bucket (and the global limit) has room again. A wait longer than `maxWaitMs` is not
   * waited here: the call goes, and a 429 says how long (the retry loop waits).
   */
  async ready(route: string, maxWaitMs: number): Promise<void> {
    const wait = Math.max(this.resetAt.get(this.bucketOf(route)) ?? 0, this.globalResetAt) - Date.now();
    if (wait > 0 && wait <= maxWaitMs) await new Promise((resolve) => setTimeout(resolve, wait));
  }

  /** What an answer on the route says of its bucket, and a 429 of the global limit (`retryAfterMs`: what it asks). */
  noted(route: string, status: number, headers: Headers, retryAfterMs: number | undefined): void {
    const now = Date.now();
    const global = headers.get("x-ratelimit-global")?.trim().toLowerCase() === "true" || headers.get("x-ratelimit-scope")?.trim().toLowerCase() === "global";
    // Discord's latest word on its global limit stands, not the longest: one absurd wait (`retry_after: 1e20`, kept as the
    // longest) would outlast every real one, and ready() waits none longer than its bound, so real waits went unheeded.
    // A wait no integer holds exactly (`1e400`, past 2^53 − 1 ms) is none to keep.
    const wait = exactWaitMs(retryAfterMs);
    if (status === 429 && global && wait !== undefined) this.globalResetAt = now + wait;
    const named = headers.get("x-ratelimit-bucket");
    if (named) this.remember(route, named);
    const bucket = this.bucketOf(route, named);
    const remaining = headers.get("x-ratelimit-remaining")?.trim();
    const resetAfterMs = retryAfterHeaderMs(headers, "x-ratelimit-reset-after");
    if (remaining === "0" && resetAfterMs !== undefined) this.resetAt.set(bucket, now + resetAfterMs);
    else if (remaining !== undefined) this.resetAt.delete(bucket);
    if (this.resetAt.size > MAX_ROUTES) for (const [key, at] of this.resetAt) if (at <= now) this.resetAt.delete(key);
  }

  /** The bucket a route's call counts against: the one Discord named, for the resource the route names; else the route's own. */
  private bucketOf(route: string, named?: string | null): string {
    const hash = named || this.buckets.get(route);
    return hash ? `${hash} ${majorOf(route)}` : route;
  }

  private remember(route: string, bucket: string): void {
    this.buckets.delete(route);
    this.buckets.set(route, bucket);
    if (this.buckets.size > MAX_ROUTES) this.buckets.delete(this.buckets.keys().next().value!);
  }
}

/** Each bot's limits under its token, shared by its replies in this isolate; the least recently made past MAX_BOTS forgotten. */
const byBot = new Map<string, RouteLimits>();
const MAX_BOTS = 100;

export function botTokenLimits(botId: string): RouteLimits {
  let limits = byBot.get(botId);
  if (!limits) {
    limits = new RouteLimits();
    byBot.set(botId, limits);
    if (byBot.size > MAX_BOTS) byBot.delete(byBot.keys().next().value!);
  }
  return limits;
}
