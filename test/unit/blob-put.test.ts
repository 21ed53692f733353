import { describe, expect, it } from "vitest";
import { BlobPuts } from "../../src/run/blob-put";
import { RUN_ENDED, RunnerCallError } from "../../src/runner/errors";

/** An R2 bucket that refuses the first `refusals` puts (Infinity: all) with `refusal`, counting them. */
function bucket(refusals: number, refusal = "We encountered an internal error. Please try again.") {
  const stored = new Map<string, Uint8Array>();
  let puts = 0;
  const r2 = {
    async put(key: string, value: Uint8Array) {
      if (++puts <= refusals) throw new Error(refusal);
      stored.set(key, value);
      return {};
    },
  } as unknown as R2Bucket;
  return { r2, stored, puts: () => puts };
}

const BYTES = new Uint8Array([1, 2, 3]);
const open = () => ({ signal: new AbortController().signal, deadlineAt: Date.now() + 60_000 });

describe("a run's puts of its inline artifacts' blobs", () => {
  it("tries a refused put again: a one-off refusal keeps the blob", async () => {
    const b = bucket(1);
    expect(await new BlobPuts(b.r2, open(), [10, 10, 10]).put("k", BYTES)).toBeNull();
    expect([b.puts(), b.stored.has("k")]).toEqual([2, true]);
  });

  it("refused throughout, gives up after its last pause, saying how many attempts were made", async () => {
    const b = bucket(Infinity);
    const refused = await new BlobPuts(b.r2, open(), [10, 10, 10]).put("k", BYTES);
    expect([refused?.attempts, (refused?.err as Error).message, b.puts()]).toEqual([4, "We encountered an internal error. Please try again.", 4]);
  });

  it("tries no put again that R2 refused for what it was asked (a key it cannot hold): it would be refused again", async () => {
    const b = bucket(Infinity, "put: The specified object name is not valid. (10020)");
    const refused = await new BlobPuts(b.r2, open(), [10, 10, 10]).put("k", BYTES);
    expect([refused?.attempts, b.puts()]).toEqual([1, 1]);
  });

  it("stops waiting at a cancel (or the deadline's abort), trying no more", async () => {
    const b = bucket(Infinity);
    const abort = new AbortController();
    const started = Date.now();
    setTimeout(() => abort.abort(new RunnerCallError("cancelled", "cancelled by an operator")), 50);
    const refused = await new BlobPuts(b.r2, { signal: abort.signal, deadlineAt: Date.now() + 60_000 }, [10_000]).put("k", BYTES);
    expect([refused?.attempts, b.puts()]).toEqual([1, 1]);
    expect(Date.now() - started).toBeLessThan(5_000);
    // Already stopped: one attempt, no pause.
    expect((await new BlobPuts(b.r2, { signal: abort.signal, deadlineAt: Date.now() + 60_000 }, [10_000]).put("k", BYTES))?.attempts).toBe(1);
  });

  it("never pauses past the run's deadline", async () => {
    const b = bucket(Infinity);
    const started = Date.now();
    const refused = await new BlobPuts(b.r2, { signal: new AbortController().signal, deadlineAt: Date.now() + 200 }, [10_000]).put("k", BYTES);
    expect([refused?.attempts, b.puts()]).toEqual([1, 1]);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it("still tries again once its runner is done (the signal says only that), its results written with the run's end", async () => {
    const done = new AbortController();
    done.abort(RUN_ENDED);
    const b = bucket(1);
    expect(await new BlobPuts(b.r2, { signal: done.signal, deadlineAt: Date.now() + 60_000 }, [10]).put("k", BYTES)).toBeNull();
    expect(b.puts()).toBe(2);
  });

  it("spends at most the run's pause budget: in a lasting outage, a later put is tried once", async () => {
    const b = bucket(Infinity);
    const puts = new BlobPuts(b.r2, open(), [20, 20, 20], 50);
    expect((await puts.put("a", BYTES))?.attempts).toBe(3);
    expect((await puts.put("b", BYTES))?.attempts).toBe(1);
  });
});
