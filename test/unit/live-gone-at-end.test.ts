import { describe, expect, it } from "vitest";
import { LiveHub, STALLED_AFTER_KEEPALIVES } from "../../src/run/live";
import type { LedgerEntry } from "../../src/stores/runs";

/**
 * At the run's end a follower's stream gets its last frames and the end, and closes: a reader still there takes them
 * after a pause, however long, as a closed stream is no longer watched.
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
  it("ends for a reader still there that takes the last frames and the end after a pause, and its stream closes", async () => {
    const { hub, reader } = await followed();
    hub.end("r", "completed", [entry(1), entry(2)]);
    // Longer than the stall window: the stream is closed, so no longer watched, and what is queued stays the reader's.
    await sleep((STALLED_AFTER_KEEPALIVES + 2) * KEEPALIVE_MS);
    let text = "";
    for (let r = await reader.read(); !r.done; r = await reader.read()) text += new TextDecoder().decode(r.value);
    expect([...text.matchAll(/^event: (\w+)$/gm)].map((m) => m[1])).toEqual(["result", "result", "end"]);
    expect(text.trimEnd().split("\n").at(-1)).toBe('data: {"status":"completed"}');
  });
});
