/**
 * Bodies streamed to and from R2, bounded by their progress rather than by a total: a large one may take minutes, but
 * R2 must send (or take) each chunk within the bound. The time a sender takes to send the next chunk is never counted:
 * it is not R2's (a run's deadline bounds an upload's sender).
 */
import { drainDeclared, drainReader } from "../lib/drain";
import type { BlobStoreTimeout } from "./blob-timeout";

/**
 * Time R2 owes something (a chunk, an answer), counted from `owe()` until `paid()`: `ms` of it fires `onStall`, once.
 * One timer at a time, looked at when it fires, not one set and cleared per chunk: the normal path pays a clock read.
 */
class StallClock {
  private owedSince: number | null = null;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private stopped = false;

  constructor(
    private readonly ms: number,
    private readonly onStall: () => void,
  ) {}

  owe(): void {
    if (this.stopped) return;
    this.owedSince = Date.now();
    if (this.timer === undefined) this.wake(this.ms);
  }

  paid(): void {
    this.owedSince = null;
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private wake(delayMs: number): void {
    this.timer = setTimeout(() => {
      this.timer = undefined;
      // Nothing owed now: the next owe() starts the timer again.
      if (this.stopped || this.owedSince === null) return;
      const left = this.owedSince + this.ms - Date.now();
      if (left > 0) return this.wake(left);
      this.stop();
      this.onStall();
    }, delayMs);
  }
}

/**
 * `body` as read from R2: a chunk R2 does not send within `ms` of being asked for errors the stream (and cancels R2's);
 * R2's stream failing errors it with what `failed` makes of that error (storage's trouble told apart).
 */
export function boundedRead(body: ReadableStream<Uint8Array>, ms: number, timeout: () => BlobStoreTimeout, failed: (err: unknown) => unknown = (err) => err): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  let controller: ReadableStreamDefaultController<Uint8Array> | undefined;
  let stalled = false;
  const clock = new StallClock(ms, () => {
    stalled = true;
    const err = timeout();
    controller?.error(err);
    void reader.cancel(err).catch(() => undefined);
  });
  return new ReadableStream<Uint8Array>(
    {
      start: (c) => void (controller = c),
      async pull(c) {
        clock.owe();
        let next: ReadableStreamReadResult<Uint8Array>;
        try {
          next = await reader.read();
        } catch (err) {
          clock.stop();
          throw failed(err);
        }
        clock.paid();
        if (stalled) return;
        if (next.done) {
          clock.stop();
          c.close();
        } else c.enqueue(next.value);
      },
      cancel(reason) {
        clock.stop();
        return reader.cancel(reason);
      },
    },
    // Read only as its reader asks: a chunk R2 owes is timed from when it is wanted.
    { highWaterMark: 0 },
  );
}

/** What is done with each chunk of a body on its way to R2 (hashed, counted), and at its end. */
export interface BodyTap {
  chunk(chunk: Uint8Array): Promise<void> | void;
  end(): Promise<void> | void;
  /** Aborted (a run's deadline), the body errors with its reason: R2's put fails and the sender's body is cancelled. */
  signal?: AbortSignal;
  /** Told as the body's failure is settled (R2's side gave up), before its rest is drained: the drain's own outcome is no part of it. */
  draining?(): void;
}

/**
 * `body` on its way to R2, each chunk given to `tap` as it passes, one chunk read ahead of R2 (as a pipe would);
 * `clock`, when given, counts the time R2 holds a chunk it has not taken, or owes its answer once the body has ended.
 * The sender's own failures (it broke off, the tap threw, the signal aborted) cancel the sender's body. R2's side
 * giving up (`stop`, or with `onCancel: "leave"` R2 cancelling what it reads) does not: `drainRest` then reads the
 * rest and discards it, so the sender, still sending, reads the answer instead of a reset.
 */
function tappedBody(body: ReadableStream<Uint8Array>, tap: BodyTap | undefined, clock?: StallClock, onCancel: "cut" | "leave" = "cut") {
  const reader = body.getReader();
  let controller: ReadableStreamDefaultController<Uint8Array> | undefined;
  /** Nothing more goes to R2: the stream it reads has failed or been cancelled. */
  let ended = false;
  /** The sender's body was cancelled: there is nothing left to drain. */
  let cut = false;
  /** Bytes read from the sender so far: what a declared length says is still to come is the rest. */
  let taken = 0;
  /** The body failed on its own side: its sender broke off, its tap threw, or its signal aborted it. */
  const state = { bodyFailed: false };
  const stop = (reason: unknown) => {
    if (ended) return;
    ended = true;
    controller?.error(reason);
  };
  const fail = (reason: unknown) => {
    stop(reason);
    if (cut) return;
    cut = true;
    void reader.cancel(reason).catch(() => undefined);
  };
  const stream = new ReadableStream<Uint8Array>(
    {
      start(c) {
        controller = c;
        const signal = tap?.signal;
        const aborted = () => {
          state.bodyFailed = true;
          fail(signal?.reason);
        };
        if (signal?.aborted) aborted();
        else signal?.addEventListener("abort", aborted, { once: true });
      },
      async pull(c) {
        // Pulled once R2 has taken what was queued: the sender's turn, not counted.
        clock?.paid();
        let next: ReadableStreamReadResult<Uint8Array>;
        try {
          next = await reader.read();
          if (!next.done) taken += next.value.length;
          if (ended) return;
          if (next.done) await tap?.end();
          else await tap?.chunk(next.value);
        } catch (err) {
          if (ended) return;
          state.bodyFailed = true;
          fail(err);
          throw err;
        }
        if (ended) return;
        // A chunk R2 must take, or (the body's end) the answer it owes.
        clock?.owe();
        if (next.done) c.close();
        else c.enqueue(next.value);
      },
      cancel(reason) {
        ended = true;
        // "leave": R2 stopped reading (its put failed), and the sender's body is left for drainRest.
        if (onCancel === "cut") fail(reason);
      },
    },
    { highWaterMark: 1 },
  );
  // Not marked cut: the signal still cuts a drain (the deadline bounds the sender), and the drain ends at the cancel.
  // A body of `declared` bytes whose rest is past the drain's bound is cut at once, as drainBody cuts one declared so.
  const drainRest = async (declared?: number) => {
    tap?.draining?.();
    if (cut) return;
    await (declared === undefined ? drainReader(reader) : drainDeclared(reader, declared - taken));
  };
  return { stream, fail, stop, drainRest, state };
}

/** `body`, each chunk given to `tap` as R2 (or whoever reads it) takes it: a body's hash computed on the way. */
export const tapped = (body: ReadableStream<Uint8Array>, tap: BodyTap): ReadableStream<Uint8Array> => tappedBody(body, tap).stream;

/**
 * A streamed put's bound: R2 must take each chunk it is offered, and answer once the body has ended, within `ms`.
 * `watch` wraps the body (before anything fixes its length: R2 needs that on the stream it is given), `bound` the put.
 */
export class PutProgress {
  private stop: (reason: unknown) => void = () => undefined;
  private drain: (declared?: number) => Promise<void> = async () => undefined;
  private body: { bodyFailed: boolean } = { bodyFailed: false };
  private stalled: (err: BlobStoreTimeout) => void = () => undefined;
  private readonly stall = new Promise<never>((_, reject) => (this.stalled = reject));
  private readonly clock: StallClock;

  constructor(ms: number, timeout: () => BlobStoreTimeout) {
    this.clock = new StallClock(ms, () => {
      const err = timeout();
      this.stalled(err);
      this.stop(err);
    });
  }

  watch(body: ReadableStream<Uint8Array>, tap?: BodyTap): ReadableStream<Uint8Array> {
    const watched = tappedBody(body, tap, this.clock, "leave");
    this.stop = watched.stop;
    this.drain = watched.drainRest;
    this.body = watched.state;
    return watched.stream;
  }

  /** Whether the body failed on its sender's side (broke off, its tap threw, its signal aborted): then a put's failure is the body's, not R2's. */
  get bodyFailed(): boolean {
    return this.body.bodyFailed;
  }

  /**
   * After R2's side failed: what R2 was still reading ends with `reason`, and the rest of the sender's body is read
   * and discarded (within lib/drain.ts's bounds, past which it is cut), so a sender still sending reads the answer.
   * `declared`: the body's whole length, when known; a rest declared past the bounds is cut at once.
   */
  async drainRest(reason: unknown, declared?: number): Promise<void> {
    this.stop(reason);
    await this.drain(declared);
  }

  /** The put's outcome, or a BlobStoreTimeout (R2's stream ended, the sender's body left to `drainRest`) once R2 has taken nothing for `ms`. */
  async bound<T>(put: Promise<T>): Promise<T> {
    // R2 owes the first read from the start.
    this.clock.owe();
    try {
      return await Promise.race([put, this.stall]);
    } finally {
      this.clock.stop();
    }
  }
}
