import type { LedgerEntry, runsStore } from "../stores/runs";

export interface LiveFrame {
  seq: number;
  type: string;
  data: unknown;
  sequence?: number | null;
  origin: string;
}

const encoder = new TextEncoder();

/** Frames are encoded once, whatever the number of subscribers and replays. */
const encoded = new WeakMap<LiveFrame, Uint8Array>();

export function sseFrame(frame: LiveFrame): Uint8Array {
  let bytes = encoded.get(frame);
  if (!bytes) {
    bytes = encoder.encode(`id: ${frame.seq}\nevent: result\ndata: ${JSON.stringify(frame)}\n\n`);
    encoded.set(frame, bytes);
  }
  return bytes;
}
export function sseEnd(status: string): Uint8Array {
  return encoder.encode(`event: end\ndata: ${JSON.stringify({ status })}\n\n`);
}

export const frameOf = (e: LedgerEntry): LiveFrame => ({ seq: e.seq, type: e.type, data: e.data, sequence: e.runnerSequence, origin: e.origin });

const REPLAY_PAGE = 500;

/** A run's whole ledger as recorded, in seq order, read page by page. */
export async function storedFrames(runs: ReturnType<typeof runsStore>, runId: string): Promise<LiveFrame[]> {
  const frames: LiveFrame[] = [];
  for (let after = 0; ; ) {
    const page = await runs.ledger(runId, after, REPLAY_PAGE);
    for (const r of page.rows) frames.push(frameOf({ ...r, data: JSON.parse(r.dataJson), origin: r.origin as "runner" | "host" }));
    if (!page.hasMore || page.rows.length === 0) return frames;
    after = page.rows[page.rows.length - 1].seq;
  }
}

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

/** The ledger of a run kept in memory while it runs, up to a byte budget. */
interface Recent {
  frames: LiveFrame[];
  bytes: number;
}

/** Per run, the recent ledger is replayed from memory up to this many bytes of encoded frames; past it, from the database. */
export const RECENT_LEDGER_BYTES = 256 * 1024;

/**
 * Live subscribers per run, held by the Durable Object that runs it, and the
 * ledger of each running run as it was published, so a subscriber that joins
 * mid-run is replayed from memory rather than from the database.
 */
export class LiveHub {
  private readonly subs = new Map<string, Set<Subscriber>>();
  private readonly recent = new Map<string, Recent | null>();

  /** From the run's start: every entry published from now on is remembered, within the budget. */
  track(runId: string) {
    this.recent.set(runId, { frames: [], bytes: 0 });
  }

  /** The run's whole ledger so far, or null when it was not tracked from its start or outgrew the budget. */
  remembered(runId: string): LiveFrame[] | null {
    return this.recent.get(runId)?.frames.slice() ?? null;
  }

  subscribe(runId: string): Subscriber {
    const sub = new Subscriber();
    let set = this.subs.get(runId);
    if (!set) this.subs.set(runId, (set = new Set()));
    set.add(sub);
    return sub;
  }

  publish(runId: string, entries: LedgerEntry[]) {
    if (entries.length === 0) return;
    const frames = entries.map(frameOf);
    this.remember(runId, frames);
    const set = this.subs.get(runId);
    if (!set) return;
    for (const f of frames) for (const s of set) s.push(f);
  }

  end(runId: string, status: string) {
    this.recent.delete(runId);
    const set = this.subs.get(runId);
    this.subs.delete(runId);
    for (const s of set ?? []) s.end(status);
  }

  private remember(runId: string, frames: LiveFrame[]) {
    const recent = this.recent.get(runId);
    if (!recent) return;
    for (const f of frames) recent.bytes += sseFrame(f).byteLength;
    // Over budget, the database is the only full copy; memory stays bounded whatever the runner sends.
    if (recent.bytes > RECENT_LEDGER_BYTES) this.recent.set(runId, null);
    else recent.frames.push(...frames);
  }

  /** End one subscriber of a run this object is not running. */
  endOne(runId: string, sub: Subscriber, status: string) {
    this.subs.get(runId)?.delete(sub);
    sub.end(status);
  }

  /**
   * SSE of a run for a new follower: the ledger so far, then live frames
   * until the run ends; null for a run this host does not know. A run this
   * object has (`active`) is replayed from memory when its ledger fits there,
   * so following it costs no database round trip; an ended run's stream ends
   * after its replay.
   */
  async follow(runId: string, active: boolean, runs: ReturnType<typeof runsStore>): Promise<ReadableStream<Uint8Array> | null> {
    const remembered = active ? this.remembered(runId) : null;
    const row = active ? null : await runs.get(runId);
    if (!active && !row) return null;
    const sub = this.subscribe(runId);
    sub.replayed(remembered ?? (await storedFrames(runs, runId)));
    if (!active) this.endOne(runId, sub, row!.status);
    return sub.readable;
  }
}
