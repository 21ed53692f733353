/**
 * One follower of a run's stream (LiveHub keeps them per run): the ledger so far, then live frames, then `end`, pulled
 * by its reader, its memory bounded, and dropped once its reader leaves what is queued untaken.
 */
import { randomHex } from "../lib/crypto";
import { UntakenWatch } from "../lib/untaken-watch";
import { SequenceSet } from "./sequence-set";
import { KEEP_ALIVE, sseEnd, sseFrame, type LiveFrame } from "./sse-frames";

const encoder = new TextEncoder();

const REPLAY_PAGE = 500;

/** A page of a run's recorded ledger after a seq, in seq order. */
export type LedgerSource = (afterSeq: number, limit: number) => Promise<{ frames: LiveFrame[]; hasMore: boolean }>;

/** How a follower is made: where its reader stands, what to do when it goes, how often a quiet stream sends a keep-alive. */
export interface FollowOptions {
  /** The frames up to this seq are the reader's already (SSE `Last-Event-ID`). */
  after?: number;
  /** Its reader went away. */
  onCancel?: () => void;
  /** A comment after this long without a frame (0: never). */
  keepAliveMs?: number;
  /** Its first ledger read waits for this: LiveHub.follow learns meanwhile whether the run has ended (see skipNeverRecorded). */
  ready?: Promise<void>;
}

/**
 * A follower whose queued data goes untaken for this many keep-alive intervals is closed, full or not. Its reader may
 * have gone without anyone hearing of it: a full stream is written no more, and workerd can fail a gone client's
 * response write inside itself (two frames back to back) with no abort reaching the Worker. Keep-alives are queued
 * data too, so a gone reader of a quiet run is found as well; a live reader that stalled that long reconnects with
 * Last-Event-ID.
 */
export const STALLED_AFTER_KEEPALIVES = 4;

/** What a follower's stream holds before its reader takes it (bytes of encoded frames). */
const QUEUED_BYTES = 64 * 1024;
/** Live frames kept for a follower that is behind; past this it reads them from the database when it catches up. */
export const BACKLOG_BYTES = 1024 * 1024;

/**
 * One follower's stream: the ledger so far, then live frames (deduplicated
 * by seq), then `end`. The stream is pulled: frames are made as its reader
 * takes them, so memory per follower stays bounded however long the ledger
 * and however slow the reader. The ledger so far comes from memory when the
 * run's object has it whole, else from the database a page at a time. A
 * follower that falls more than BACKLOG_BYTES behind the live frames drops
 * them and reads the database instead (a frame is published only once it is
 * recorded). The result stream and the Host API both write a run's ledger,
 * so frames may arrive out of seq order: written numbers are tracked as a set.
 * A run can be quiet for minutes (a runner calling tools): the stream then
 * sends a comment every `keepAliveMs`, so no proxy closes it as idle.
 */
export class Subscriber {
  private readonly written = new SequenceSet(1 << 16);
  /** Frames waiting for the reader, in arrival order. */
  private backlog: LiveFrame[];
  private backlogBytes = 0;
  /** Read the database after this seq before the backlog (null: not behind). Pages move it forward, so holes in the ledger's seqs never stall it. */
  private catchUpAfter: number | null;
  /** Where a follower that fell behind must read from, noted by `push` (perhaps while a page is being read) for `pull` to take. */
  private fellBehindAfter: number | null = null;
  private ended: string | null = null;
  private closed = false;
  /**
   * Every frame up to this seq has reached this follower: sent as each frame's SSE `id`, so a reconnect's
   * `Last-Event-ID` never skips a frame published out of seq order (frame ids alone would, a seq published
   * late being lower than one already sent). A hole in the ledger holds it back: a resume may then repeat
   * frames, which carry their seq.
   */
  private delivered: number;
  private wake: (() => void) | null = null;
  private controller: ReadableStreamDefaultController<Uint8Array> | null = null;
  readonly readable: ReadableStream<Uint8Array>;
  /** Random: the Worker that served the follower closes it by this id when its request goes away. */
  readonly id = randomHex(8);

  private readonly after: number;
  private readonly keepAliveMs: number;
  private readonly onCancel: (() => void) | undefined;
  private ready: Promise<void> | undefined;
  /** Every enqueue goes through it: a reader that leaves what is queued untaken for STALLED_AFTER_KEEPALIVES intervals is gone. */
  private readonly untaken: UntakenWatch<Uint8Array>;

  /** `known`: the whole ledger so far, when the caller has it; otherwise it is read from `source`. */
  constructor(
    private readonly source: LedgerSource,
    known: LiveFrame[] | null,
    { after = 0, onCancel, keepAliveMs = 0, ready }: FollowOptions = {},
  ) {
    this.after = after;
    this.ready = ready;
    this.keepAliveMs = keepAliveMs;
    this.onCancel = onCancel;
    this.delivered = after;
    this.backlog = known?.filter((f) => f.seq > after) ?? [];
    this.catchUpAfter = known === null ? after : null;
    this.untaken = new UntakenWatch<Uint8Array>({ highWaterMark: QUEUED_BYTES, size: (chunk) => chunk.byteLength, intervalMs: keepAliveMs, intervals: STALLED_AFTER_KEEPALIVES, onGone: () => this.dropStalled() });
    this.readable = new ReadableStream<Uint8Array>(
      {
        start: (controller) => void (this.controller = controller),
        pull: (controller) => this.pull(controller),
        cancel: () => {
          this.closed = true;
          this.untaken.stop();
          this.wake?.();
          onCancel?.();
        },
      },
      this.untaken.strategy,
    );
  }

  push(frame: LiveFrame) {
    if (this.closed || this.ended !== null) return;
    this.backlog.push(frame);
    this.backlogBytes += sseFrame(frame).byteLength;
    if (this.backlogBytes > BACKLOG_BYTES) {
      // Behind: the database has every one of them (a frame is published once recorded), from the lowest on.
      const lowest = Math.min(...this.backlog.map((f) => f.seq));
      this.fellBehindAfter = Math.min(this.fellBehindAfter ?? Infinity, lowest - 1);
      this.backlog = [];
      this.backlogBytes = 0;
    }
    this.wake?.();
  }

  /**
   * Its reader went away (the Worker saw its request go) and no cancel came (it crossed an RPC pipe): stop, and end
   * the stream so whatever pumps it lets go. Ended, not errored: workerd reports an error of a stream its RPC pipe reads
   * as an uncaught exception of this object, one per follower that leaves. What is still queued goes nowhere: the
   * pipe's far end is gone, so the pump's next write fails, quietly, and ends it.
   */
  close() {
    if (!this.stop()) return;
    try {
      this.controller?.close();
    } catch {
      // already closed
    }
  }

  /**
   * Its reader left what is queued untaken for too long (UntakenWatch): its queue is dropped now, as only an error does,
   * and its slot is freed. workerd reports the error as uncaught only if the pipe reads again (a reader that had only
   * stalled); a gone reader's pipe reads no more.
   */
  private dropStalled() {
    if (!this.stop()) return;
    try {
      this.controller?.error(new Error("the follower took nothing for too long"));
    } catch {
      // already closed
    }
    this.onCancel?.();
  }

  /** Nothing more is made for this follower; false when it had stopped already. */
  private stop(): boolean {
    if (this.closed) return false;
    this.closed = true;
    this.untaken.stop();
    this.backlog = [];
    this.wake?.();
    return true;
  }

  end(status: string) {
    if (this.ended !== null) return;
    this.ended = status;
    this.wake?.();
  }

  /** Called when the reader wants more: answers once something was enqueued (a pull that enqueues nothing is not called again). */
  private async pull(controller: ReadableStreamDefaultController<Uint8Array>): Promise<void> {
    if (this.ready) await this.ready.finally(() => (this.ready = undefined));
    let enqueued = 0;
    while (enqueued === 0) {
      if (this.closed) return;
      this.takeFellBehind();
      if (this.catchUpAfter !== null) {
        const after = this.catchUpAfter;
        // Read once the run has ended, a page is final: a seq missing from it was never recorded and never will be.
        const final = this.ended !== null;
        const page = await this.source(after, REPLAY_PAGE);
        if (this.closed) return; // closed meanwhile: an enqueue would throw, erroring the ended stream
        let previous = after;
        for (const f of page.frames) {
          if (final) this.skipNeverRecorded(previous, f.seq);
          enqueued += this.write(controller, f);
          previous = f.seq;
        }
        this.catchUpAfter = page.hasMore ? (page.frames.at(-1)?.seq ?? after) : null;
      } else if (this.backlog.length) {
        const frames = this.backlog;
        this.backlog = [];
        this.backlogBytes = 0;
        for (const f of frames) enqueued += this.write(controller, f);
      } else if (this.ended !== null) {
        this.closed = true;
        // Unwatched: a closed stream's desiredSize no longer tells what is queued. Left to the pipe, not held here: a
        // reader gone with it queued leaves a stream nothing in this object refers to (bench:memory counts them).
        this.untaken.stop();
        controller.enqueue(sseEnd(this.ended));
        controller.close();
        return;
      } else if (await this.idle()) {
        if (this.closed) return;
        // Queued data like any frame: a gone reader of a quiet run leaves it untaken.
        this.untaken.enqueue(controller, KEEP_ALIVE);
        enqueued++;
      }
    }
  }

  /** Waits for a push, an end or a close (false), or for `keepAliveMs` of quiet (true). */
  private async idle(): Promise<boolean> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    try {
      return await new Promise<boolean>((resolve) => {
        this.wake = () => resolve(false);
        if (this.keepAliveMs > 0) timer = setTimeout(() => resolve(true), this.keepAliveMs);
      });
    } finally {
      clearTimeout(timer);
      this.wake = null;
    }
  }

  /** A fall behind noted by `push` joins the catch-up: the earlier position wins. */
  private takeFellBehind() {
    if (this.fellBehindAfter === null) return;
    this.catchUpAfter = Math.min(this.catchUpAfter ?? Infinity, this.fellBehindAfter);
    this.fellBehindAfter = null;
  }

  /**
   * The seqs between two entries of a final page count as delivered, so the `id` sent moves past a hole in the
   * ledger (a record whose write failed) instead of staying below it: a reconnect would replay all that follows it.
   */
  private skipNeverRecorded(previous: number, next: number) {
    for (let seq = Math.max(previous, this.after) + 1; seq < next; seq++) if (!this.written.has(seq)) this.written.add(seq);
  }

  /** Enqueues a frame not written yet; answers how many were (0 or 1). */
  private write(controller: ReadableStreamDefaultController<Uint8Array>, f: LiveFrame): number {
    if (f.seq <= this.after || this.written.has(f.seq)) return 0;
    this.written.add(f.seq);
    while (this.written.has(this.delivered + 1)) this.delivered++;
    const id = encoder.encode(`id: ${this.delivered}\n`);
    const body = sseFrame(f);
    // One chunk per frame, as a reader may stop at any chunk.
    const chunk = new Uint8Array(id.length + body.length);
    chunk.set(id);
    chunk.set(body, id.length);
    this.untaken.enqueue(controller, chunk);
    return 1;
  }
}
