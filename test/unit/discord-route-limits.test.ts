import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { RouteLimits } from "../../src/platforms/discord/route-limits";

/**
 * Discord's global rate limit (a 429 with `X-RateLimit-Global`) holds the bot's next calls until it resets. An absurd
 * wait (`retry_after: 1e20`) must not outlast every real one: ready() waits none longer than its bound, so kept as
 * the longest it would leave every later real global wait unheeded, each call meeting its 429 (which count toward
 * Discord's ban on clients that keep getting them).
 */
const ROUTE = "/channels/1/messages";
const GLOBAL = new Headers({ "x-ratelimit-global": "true" });

beforeEach(() => vi.useFakeTimers());
afterEach(() => vi.useRealTimers());

/** Whether ready() has let the call go after `ms` of (fake) time. */
async function goesAfter(limits: RouteLimits, ms: number, maxWaitMs = 60_000): Promise<boolean> {
  let gone = false;
  void limits.ready(ROUTE, maxWaitMs).then(() => (gone = true));
  await vi.advanceTimersByTimeAsync(ms);
  return gone;
}

describe("Discord's global limit", () => {
  it("holds the next call for the wait a global 429 asked", async () => {
    const limits = new RouteLimits();
    limits.noted(ROUTE, 429, GLOBAL, 2_000);
    expect(await goesAfter(limits, 1_900)).toBe(false);
    expect(await goesAfter(limits, 200)).toBe(true);
  });

  it("after an absurd wait (1e20 s), a real one that follows is waited for, not left unheeded", async () => {
    const limits = new RouteLimits();
    limits.noted(ROUTE, 429, GLOBAL, 1e23);
    // Past ready()'s bound: not waited here (the call goes, and meets Discord's word on it).
    expect(await goesAfter(limits, 0)).toBe(true);
    limits.noted(ROUTE, 429, GLOBAL, 2_000);
    let [gone, waited] = [false, 0];
    void limits.ready(ROUTE, 60_000).then(() => (gone = true));
    for (; !gone && waited < 5_000; waited += 100) await vi.advanceTimersByTimeAsync(100);
    expect(waited).toBeGreaterThanOrEqual(1_900);
    expect(waited).toBeLessThanOrEqual(2_100);
  });

  it("keeps no wait past any number (1e400)", async () => {
    const limits = new RouteLimits();
    limits.noted(ROUTE, 429, GLOBAL, Number.POSITIVE_INFINITY);
    expect(await goesAfter(limits, 0, Number.MAX_SAFE_INTEGER)).toBe(true);
  });
});
