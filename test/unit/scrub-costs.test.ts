import { GCProfiler, setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { scrub } from "../../src/lib/scrub";
import { SecretMatcher } from "../../src/lib/secret-matcher";
import { StreamScrubber } from "../../src/lib/stream-scrub";

/**
 * What scrubbing costs beyond its time: a text without secrets is given back having allocated nothing (the young
 * generation is never collected for it), and a stream scrubber keeps what may still start a secret, never the pieces
 * it gave out. Measured on V8's heap, as the host's workerd and Node share it.
 */
setFlagsFromString("--expose-gc");
const collect = runInNewContext("gc") as () => void;

const MIB = 1 << 20;
/** A flat string of a mebibyte (one byte a character), a new one each time. */
const bigPiece = (i: number) => new TextDecoder().decode(new Uint8Array(MIB).fill(0x61 + (i % 26)));

function heapAfterCollection(): number {
  collect();
  return process.memoryUsage().heapUsed;
}

describe("what scrubbing costs", () => {
  it("allocates nothing for a text no secret is in (a million texts, no young-generation collection)", () => {
    const matcher = new SecretMatcher(["sk-live-0123456789abcdef", "tok-ABCdef0123456789"]);
    const text = "an ordinary line of text with nothing secret in it at all, some eighty characters.";
    for (let i = 0; i < 10_000; i++) scrub(text, matcher);
    collect();
    const profiler = new GCProfiler();
    profiler.start();
    let same = 0;
    for (let i = 0; i < 1_000_000; i++) if (scrub(text, matcher) === text) same++;
    const collections = profiler.stop()?.statistics ?? [];
    expect(same).toBe(1_000_000);
    // A small object a call would fill the young generation (some megabytes) several times over.
    expect(collections.filter((c) => c.gcType === "Scavenge").length).toBeLessThanOrEqual(1);
  });

  it("lets go of the pieces a stream gave out (32 pieces of a mebibyte, no secret in them)", () => {
    const stream = new StreamScrubber(new SecretMatcher(["sk-live-0123456789abcdef"]));
    const before = heapAfterCollection();
    let given = 0;
    for (let i = 0; i < 32; i++) given += stream.push(bigPiece(i)).length;
    const kept = heapAfterCollection() - before;
    expect(given).toBe(32 * MIB);
    // Every piece was given out whole; what stays is the scrubber's few small lists, not 32 MiB of text.
    expect(kept).toBeLessThan(4 * MIB);
    expect(stream.flush()).toBe("");
  });
});
