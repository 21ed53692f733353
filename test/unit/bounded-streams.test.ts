import { describe, expect, it } from "vitest";
import { BlobStoreTimeout } from "../../src/artifacts/blob-timeout";
import { boundedRead, PutProgress } from "../../src/artifacts/bounded-streams";

/**
 * A body's bound is its progress (README "R2 that does not answer"): R2 must take, or send, each chunk within it; the
 * sender's pace, or the reader's, is never counted. Plain streams stand for the sender, R2 and the reader.
 */
const BOUND_MS = 100;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const timeout = (op: string) => () => new BlobStoreTimeout(op, "artifacts/x", BOUND_MS);

/** A sender of `chunks` chunks of `bytes`, each `gapMs` after the previous was read; `cancelled` says whether its reader gave up on it. */
function sender(chunks: number, gapMs: number, bytes = 1) {
  const state = { sent: 0, cancelled: false };
  const stream = new ReadableStream<Uint8Array>({
    async pull(c) {
      if (state.sent > 0) await sleep(gapMs);
      if (state.sent === chunks) return c.close();
      state.sent++;
      c.enqueue(new Uint8Array(bytes).fill(state.sent));
    },
    cancel: () => void (state.cancelled = true),
  });
  return { stream, state };
}

/** R2 taking a put's body: `takes` chunks at most (Infinity: all), then answering, unless `answers` is false. */
async function r2Put(body: ReadableStream<Uint8Array>, takes: number, answers = true): Promise<number> {
  const reader = body.getReader();
  let taken = 0;
  while (taken < takes) {
    const next = await reader.read();
    if (next.done) break;
    taken++;
  }
  if (taken === takes && takes !== Infinity) return new Promise(() => undefined);
  return answers ? taken : new Promise(() => undefined);
}

describe("a streamed put, bounded by R2's progress", () => {
  it("takes a slow sender's body whole: the time the sender takes is not R2's", async () => {
    const { stream } = sender(3, BOUND_MS * 2.5);
    const progress = new PutProgress(BOUND_MS, timeout("put"));
    expect(await progress.bound(r2Put(progress.watch(stream), Infinity))).toBe(3);
  });

  it("fails once R2 takes nothing more for the bound, leaving the sender's body to be read to its end", async () => {
    const { stream, state } = sender(100, 0);
    const progress = new PutProgress(BOUND_MS, timeout("put"));
    const started = Date.now();
    const stalled = await progress.bound(r2Put(progress.watch(stream), 2)).catch((err: unknown) => err);
    expect(stalled).toBeInstanceOf(BlobStoreTimeout);
    expect(Date.now() - started).toBeLessThan(BOUND_MS * 10);
    // Not cut: a sender still sending is heard out, so it reads the answer rather than a reset.
    await sleep(10);
    expect(state.cancelled).toBe(false);
    await progress.drainRest(stalled);
    expect([state.sent, state.cancelled]).toEqual([100, false]);
  });

  it("cuts the sender's body a drain finds past its bound (lib/drain.ts)", async () => {
    const { stream, state } = sender(10, 0, 1024 * 1024);
    const progress = new PutProgress(BOUND_MS, timeout("put"));
    const failed = new Error("put: We encountered an internal error. Please try again. (10001)");
    // R2 fails the put without reading its body.
    const failingR2 = async (body: ReadableStream<Uint8Array>) => (void body, Promise.reject(failed));
    await expect(progress.bound(failingR2(progress.watch(stream)))).rejects.toBe(failed);
    expect(state.cancelled).toBe(false);
    await progress.drainRest(failed);
    expect(state.cancelled).toBe(true);
    expect(state.sent).toBeLessThan(10);
  });

  it("fails when R2 has the whole body and never answers", async () => {
    const { stream } = sender(2, 0);
    const progress = new PutProgress(BOUND_MS, timeout("put"));
    await expect(progress.bound(r2Put(progress.watch(stream), Infinity, false))).rejects.toThrow(/did not answer a put of artifacts\/x within 100 ms/);
  });

  it("hands each chunk to its tap on the way, and ends it", async () => {
    const { stream } = sender(3, 0);
    const seen: number[] = [];
    let ended = false;
    const progress = new PutProgress(BOUND_MS, timeout("put"));
    const tap = { chunk: (c: Uint8Array) => void seen.push(c[0]), end: () => void (ended = true) };
    expect(await progress.bound(r2Put(progress.watch(stream, tap), Infinity))).toBe(3);
    expect([seen, ended]).toEqual([[1, 2, 3], true]);
  });

  it("tells a put failed by its sender breaking off (the body's failure) from one R2 failed (storage's)", async () => {
    const broken = new ReadableStream<Uint8Array>({ pull: (c) => c.error(new Error("the client went away")) });
    const cut = new PutProgress(BOUND_MS, timeout("put"));
    await expect(cut.bound(r2Put(cut.watch(broken), Infinity))).rejects.toThrow("the client went away");
    expect(cut.bodyFailed).toBe(true);
    // R2 takes a chunk, then fails the put.
    const failingR2 = async (body: ReadableStream<Uint8Array>) => {
      await body.getReader().read();
      throw new Error("put: We encountered an internal error. Please try again. (10001)");
    };
    const refused = new PutProgress(BOUND_MS, timeout("put"));
    await expect(refused.bound(failingR2(refused.watch(sender(3, 0).stream)))).rejects.toThrow(/10001/);
    expect(refused.bodyFailed).toBe(false);
  });
});

describe("a body read from R2, bounded by R2's progress", () => {
  const readAll = async (body: ReadableStream<Uint8Array>, pauseMs = 0) => {
    const reader = body.getReader();
    const got: number[] = [];
    for (;;) {
      const next = await reader.read();
      if (next.done) return got;
      got.push(next.value[0]);
      await sleep(pauseMs);
    }
  };

  it("is read whole by a slow reader: the time the reader takes is not R2's", async () => {
    const { stream } = sender(3, 0);
    expect(await readAll(boundedRead(stream, BOUND_MS, timeout("read")), BOUND_MS * 2.5)).toEqual([1, 2, 3]);
  });

  it("fails once a chunk asked for does not come within the bound, cancelling R2's stream", async () => {
    const { stream, state } = sender(3, BOUND_MS * 5);
    await expect(readAll(boundedRead(stream, BOUND_MS, timeout("read")))).rejects.toThrow(/did not answer a read of artifacts\/x within 100 ms/);
    expect(state.cancelled).toBe(true);
  });
});
