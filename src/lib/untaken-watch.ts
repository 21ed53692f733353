/**
 * Tells when a stream's reader has gone without saying so. A stream the conversation's object answers with crosses an
 * RPC pipe to the Worker; when its client leaves, workerd may fail the Worker's response write inside itself and tell
 * no one (no `Request.signal` abort, no cancel of the stream): the pipe just stops taking what is queued. A live reader
 * takes what is queued promptly, so a queue with something in it that has not shrunk by a byte for `intervals` checks
 * `intervalMs` apart is a gone reader. Taking only part of it (a slow reader) counts as taking: it is alive.
 *
 * Whatever is enqueued goes through `enqueue`, which counts it: what the reader took is what was enqueued less what is
 * still queued (the stream's `desiredSize`, in the units of its `size`), so new data queued meanwhile hides nothing.
 * The stream is made with this watch's `strategy`, so the two count alike. A closed stream is not watched (stop first):
 * workerd answers 0 for its desiredSize however much is still queued.
 */
export class UntakenWatch<Chunk> {
  /** For the stream's constructor: what is queued is read from its desiredSize, which counts in these units. */
  readonly strategy: { highWaterMark: number; size: (chunk: Chunk) => number };
  private readonly intervalMs: number;
  private readonly intervals: number;
  private readonly onGone: () => void;
  /** In the stream's size units, since it began. */
  private enqueued = 0;
  private takenAtLastCheck = 0;
  private untakenChecks = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private stopped = false;

  constructor(opts: {
    highWaterMark: number;
    size: (chunk: Chunk) => number;
    /** 0: never watched. */
    intervalMs: number;
    intervals: number;
    /** The reader is gone: called once, and the watch stops. */
    onGone: () => void;
  }) {
    this.strategy = { highWaterMark: opts.highWaterMark, size: opts.size };
    this.intervalMs = opts.intervalMs;
    this.intervals = opts.intervals;
    this.onGone = opts.onGone;
  }

  /** Enqueues the chunk; while anything is queued, checks every interval that the reader takes some of it. */
  enqueue(controller: ReadableStreamDefaultController<Chunk>, chunk: Chunk) {
    controller.enqueue(chunk);
    this.enqueued += this.strategy.size(chunk);
    // Taken at once (a read was waiting), nothing waits: no timer per chunk for a live reader.
    if (this.timer !== undefined || this.stopped || this.intervalMs <= 0 || this.queued(controller) === 0) return;
    this.takenAtLastCheck = this.taken(controller);
    this.untakenChecks = 0;
    this.check(controller);
  }

  /** The stream is over, or its reader known gone: no more checks. */
  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** What the reader has not taken yet, in the stream's size units (errored, desiredSize null: nothing). Not after a close. */
  private queued(controller: ReadableStreamDefaultController<Chunk>) {
    return this.strategy.highWaterMark - (controller.desiredSize ?? this.strategy.highWaterMark);
  }

  private check(controller: ReadableStreamDefaultController<Chunk>) {
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (this.stopped) return;
      const taken = this.taken(controller);
      if (taken > this.takenAtLastCheck) this.untakenChecks = 0;
      else this.untakenChecks++;
      this.takenAtLastCheck = taken;
      // Nothing waits: watched again from the next chunk that does.
      if (this.queued(controller) === 0) return;
      if (this.untakenChecks < this.intervals) return this.check(controller);
      this.stop();
      this.onGone();
    }, this.intervalMs);
  }

  private taken(controller: ReadableStreamDefaultController<Chunk>) {
    return this.enqueued - this.queued(controller);
  }
}
