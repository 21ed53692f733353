import type { LedgerEntry } from "../stores/runs";

export interface LiveFrame {
  seq: number;
  type: string;
  data: unknown;
  sequence?: number | null;
  origin: string;
}

const encoder = new TextEncoder();

export function sseFrame(frame: LiveFrame): Uint8Array {
  return encoder.encode(`id: ${frame.seq}\nevent: result\ndata: ${JSON.stringify(frame)}\n\n`);
}
export function sseEnd(status: string): Uint8Array {
  return encoder.encode(`event: end\ndata: ${JSON.stringify({ status })}\n\n`);
}

export const frameOf = (e: LedgerEntry): LiveFrame => ({ seq: e.seq, type: e.type, data: e.data, sequence: e.runnerSequence, origin: e.origin });

/**
 * One subscriber's stream: the replayed ledger first, then live frames past
 * it (deduplicated by seq), then `end`. Live frames and the end that arrive
 * while the replay is still being read wait for it. The result stream and
 * the Host API both write a run's ledger, so frames may arrive out of seq
 * order: seen numbers are tracked, not just the highest.
 */
export class Subscriber {
  /** Every seq ≤ contiguous was written; `above` holds those written past it. */
  private contiguous = 0;
  private readonly above = new Set<number>();
  private buffered: LiveFrame[] | null = [];
  private pendingEnd: string | null = null;
  private closed = false;
  private readonly writer: WritableStreamDefaultWriter<Uint8Array>;
  readonly readable: ReadableStream<Uint8Array>;

  constructor() {
    const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
    this.readable = readable;
    this.writer = writable.getWriter();
  }

  replayed(frames: LiveFrame[]) {
    if (!this.buffered) return;
    for (const f of frames) this.write(f);
    const pending = this.buffered;
    this.buffered = null;
    for (const f of pending) this.write(f);
    if (this.pendingEnd !== null) this.end(this.pendingEnd);
  }

  push(frame: LiveFrame) {
    if (this.buffered) this.buffered.push(frame);
    else this.write(frame);
  }

  end(status: string) {
    if (this.buffered) {
      this.pendingEnd = status;
      return;
    }
    if (this.closed) return;
    this.closed = true;
    this.writer.write(sseEnd(status)).catch(() => {});
    this.writer.close().catch(() => {});
  }

  private write(f: LiveFrame) {
    if (this.closed || f.seq <= this.contiguous || this.above.has(f.seq)) return;
    this.above.add(f.seq);
    while (this.above.delete(this.contiguous + 1)) this.contiguous++;
    // A reader that went away makes writes fail; the run does not care.
    this.writer.write(sseFrame(f)).catch(() => {
      this.closed = true;
    });
  }
}

/** Live subscribers per run, held by the Durable Object that runs it. */
export class LiveHub {
  private readonly subs = new Map<string, Set<Subscriber>>();

  subscribe(runId: string): Subscriber {
    const sub = new Subscriber();
    let set = this.subs.get(runId);
    if (!set) this.subs.set(runId, (set = new Set()));
    set.add(sub);
    return sub;
  }

  publish(runId: string, entries: LedgerEntry[]) {
    const set = this.subs.get(runId);
    if (!set || entries.length === 0) return;
    for (const e of entries) for (const s of set) s.push(frameOf(e));
  }

  end(runId: string, status: string) {
    const set = this.subs.get(runId);
    this.subs.delete(runId);
    for (const s of set ?? []) s.end(status);
  }

  /** End one subscriber of a run this object is not running. */
  endOne(runId: string, sub: Subscriber, status: string) {
    this.subs.get(runId)?.delete(sub);
    sub.end(status);
  }
}
