/**
 * Tells when a stream's reader has gone without saying so. A stream the conversation's object answers with crosses an
 * RPC pipe to the Worker; when its client leaves, workerd may fail the Worker's response write inside itself and tell
 * no one (no `Request.signal` abort, no cancel of the stream): the pipe just stops taking what is queued. A live reader
 * takes what is queued promptly, so a queue with something in it that has not shrunk by a byte for `intervals` checks
 * `intervalMs` apart is a gone reader. Taking only part of it (a slow reader) counts as taking: it is alive.
 *
 * Whatever is enqueued goes through `enqueue`, which counts it: what the reader took is what was enqueued less what is
 * still queued (the stream's `desiredSize`, in the units of its `size`), so new data queued meanwhile hides nothing.
 */
export class UntakenWatch<Chunk> {
  /** In the stream's size units, since it began. */
  private enqueued = 0;
  private takenAtLastCheck = 0;
  private untakenChecks = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private stopped = false;

  constructor(
    private readonly opts: {
      /** The stream's highWaterMark and size, as given to its constructor. */
      highWaterMark: number;
      size: (chunk: Chunk) => number;
      /** 0: never watched. */
      intervalMs: number;
      intervals: number;
      /** The reader is gone: called once, and the watch stops. */
      onGone: () => void;
    },
  ) {}

  /** Enqueues the chunk; while anything is queued, checks every interval that the reader takes some of it. */
  enqueue(controller: ReadableStreamDefaultController<Chunk>, chunk: Chunk) {
    controller.enqueue(chunk);
    this.enqueued += this.opts.size(chunk);
    // Taken at once (a read was waiting), nothing waits: no timer per chunk for a live reader.
    if (this.timer !== undefined || this.stopped || this.opts.intervalMs <= 0 || this.queued(controller) === 0) return;
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
      if (this.untakenChecks < this.opts.intervals) return this.check(controller);
      this.stop();
      this.opts.onGone();
    }, this.opts.intervalMs);
  }

  /** Errored (desiredSize null): nothing is queued any more. */
  private queued(controller: ReadableStreamDefaultController<Chunk>) {
    return this.opts.highWaterMark - (controller.desiredSize ?? this.opts.highWaterMark);
  }

  private taken(controller: ReadableStreamDefaultController<Chunk>) {
    return this.enqueued - this.queued(controller);
  }
}
