import { describe, expect, it } from "vitest";
import { LiveHub, STALLED_AFTER_KEEPALIVES } from "../../src/run/live";
import type { LedgerEntry } from "../../src/stores/runs";

/**
 * README: a follower whose queued data goes untaken for 4 keep-alive intervals is closed. That holds at the run's end
 * too: a reader that left just before its last frames (written back to back with the end, the case workerd fails
 * inside itself) leaves them and the end untaken, and a stream closed with them queued could no longer be dropped
 * (workerd keeps a closed stream's queue through error()), so it would hold them for as long as the object lives.
 */
const KEEPALIVE_MS = 20;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const entry = (seq: number): LedgerEntry => ({ runId: "r", seq, type: "t", data: { pad: "x".repeat(100) }, runnerSequence: null, origin: "runner", createdAt: 0 });
const noLedger = async () => ({ frames: [], hasMore: false });

/** A follower of a quiet run whose reader has had a keep-alive (so it was there), and its reader. */
async function followed() {
  const hub = new LiveHub(() => KEEPALIVE_MS);
  hub.track("r");
  const sub = hub.subscribe("r", noLedger);
  const reader = sub.readable.getReader();
  await reader.read();
  return { hub, reader };
}

describe("a follower at its run's end", () => {
  it("is dropped when its reader left just before the last frames and the end: what they queued is not held", async () => {
    const { hub, reader } = await followed();
    const endedAt = Date.now();
    hub.end("r", "completed", [entry(1), entry(2)]);
    // The stream errors once dropped, and closes only once its reader has taken everything; a held one does neither.
    const outcome = await Promise.race([
      reader.closed.then(
        () => "closed",
        (err: unknown) => String(err),
      ),
      sleep(100 * KEEPALIVE_MS).then(() => "held"),
    ]);
    expect(outcome).toMatch(/took nothing/);
    // Not at once: after about STALLED_AFTER_KEEPALIVES intervals (less one, as timers may fire a millisecond early).
    expect(Date.now() - endedAt).toBeGreaterThanOrEqual((STALLED_AFTER_KEEPALIVES - 1) * KEEPALIVE_MS);
  });

  it("ends for a reader still there that takes the last frames and the end after a pause, and its stream closes", async () => {
    const { hub, reader } = await followed();
    hub.end("r", "completed", [entry(1), entry(2)]);
    // Less than the stall window: queued all that time, and it is the reader's.
    await sleep((STALLED_AFTER_KEEPALIVES - 2) * KEEPALIVE_MS);
    let text = "";
    for (let r = await reader.read(); !r.done; r = await reader.read()) text += new TextDecoder().decode(r.value);
    expect([...text.matchAll(/^event: (\w+)$/gm)].map((m) => m[1])).toEqual(["result", "result", "end"]);
    expect(text.trimEnd().split("\n").at(-1)).toBe('data: {"status":"completed"}');
  });
});
