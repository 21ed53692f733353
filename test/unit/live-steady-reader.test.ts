import { describe, expect, it } from "vitest";
import { STALLED_AFTER_KEEPALIVES, Subscriber, type LiveFrame } from "../../src/run/live";

/**
 * README: "one whose queued data, frames or keep-alives, goes untaken for 4 keep-alive intervals is closed". A reader
 * that keeps taking frames, only more slowly than the run produces them, takes something every few milliseconds:
 * it must not be closed as stalled.
 */
const KEEPALIVE_MS = 50;
const empty = async () => ({ frames: [] as LiveFrame[], hasMore: false });

describe("a follower whose reader keeps taking frames, slowly", () => {
  it("is not closed as stalled while it takes a frame every few milliseconds", async () => {
    const sub = new Subscriber(empty, [], { keepAliveMs: KEEPALIVE_MS });
    const reader = sub.readable.getReader();
    // A burst of 400 frames of ~1 KiB published at once (a flooding runner), more than the stream holds ahead (64 KiB).
    for (let seq = 1; seq <= 400; seq++) sub.push({ seq, type: "custom.progress", data: { pad: "x".repeat(1000) }, origin: "runner" });
    const stallWindow = STALLED_AFTER_KEEPALIVES * KEEPALIVE_MS;
    const startedAt = Date.now();
    let frames = 0;
    let longestGap = 0;
    let last = Date.now();
    let error: unknown = null;
    // The reader takes one chunk every 5 ms, for 3 stall windows: never a pause anywhere near the window.
    while (Date.now() - startedAt < 3 * stallWindow) {
      const r = await reader.read().catch((err: unknown) => ((error = err), { done: true as const, value: undefined }));
      if (r.done) break;
      frames++;
      longestGap = Math.max(longestGap, Date.now() - last);
      await new Promise((res) => setTimeout(res, 5));
      last = Date.now();
    }
    // The test's own premise (a pause of a whole window would be a stall): not half of it, which a busy machine's GC pause can reach.
    expect(longestGap).toBeLessThan(stallWindow);
    expect({ closed: error === null ? null : String(error), readerStillOpen: frames > 0 }).toEqual({ closed: null, readerStillOpen: true });
    sub.end("completed");
  });
});
