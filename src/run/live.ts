import { ENDED, ledgerEntryOf, type LedgerEntry, type runsStore } from "../stores/runs";
import { sseFrame, type LiveFrame } from "./sse-frames";
import { Subscriber, type LedgerSource } from "./live-subscriber";

export type { LiveFrame };
export { BACKLOG_BYTES, STALLED_AFTER_KEEPALIVES, Subscriber, type FollowOptions, type LedgerSource } from "./live-subscriber";

export const frameOf = (e: LedgerEntry): LiveFrame => ({ seq: e.seq, type: e.type, data: e.data, sequence: e.runnerSequence ?? undefined, origin: e.origin });

/** Reads a run's recorded ledger for its followers. */
function ledgerSource(runs: ReturnType<typeof runsStore>, runId: string): LedgerSource {
  return async (afterSeq, limit) => {
    const page = await runs.ledger(runId, afterSeq, limit);
    return { frames: page.rows.map((r) => frameOf(ledgerEntryOf(r))), hasMore: page.hasMore };
  };
}

/** The ledger of a run kept in memory while it runs, up to a byte budget. */
interface Recent {
  frames: LiveFrame[];
  bytes: number;
}

/**
 * Followers of one run at once. Each may hold its backlog (up to about 1 MiB) in the object's memory, which every run
 * of the conversation shares: one more is refused until one leaves, so no number of readers can exhaust it.
 */
export const MAX_FOLLOWERS_PER_RUN = 32;

/** Per run, the recent ledger is replayed from memory up to this many bytes of encoded frames; past it, from the database. */
export const RECENT_LEDGER_BYTES = 256 * 1024;

/**
 * Live subscribers per run, held by the Durable Object that runs it, and the
 * ledger of each running run as it was published, so a subscriber that joins
 * mid-run is replayed from memory rather than from the database.
 */
export class LiveHub {
  private readonly subs = new Map<string, Set<Subscriber>>();

  /** `keepAliveMs`: read when a follower joins (configuration is read where it is used). */
  constructor(private readonly keepAliveMs: () => number = () => 0) {}

  private readonly recent = new Map<string, Recent | null>();

  /** From the run's start: every entry published from now on is remembered, within the budget. */
  track(runId: string) {
    this.recent.set(runId, { frames: [], bytes: 0 });
  }

  /** The run's whole ledger so far, or null when it was not tracked from its start or outgrew the budget. */
  remembered(runId: string): LiveFrame[] | null {
    return this.recent.get(runId)?.frames.slice() ?? null;
  }

  /** A follower of a run this object runs: replayed from memory when its ledger is there whole, else from `source`. */
  subscribe(runId: string, source: LedgerSource, after = 0, ready?: Promise<void>): Subscriber {
    let set = this.subs.get(runId);
    if (!set) this.subs.set(runId, (set = new Set()));
    // A follower whose reader went away is forgotten at once, not when the run ends.
    const sub = new Subscriber(source, this.remembered(runId), { after, onCancel: () => this.forget(runId, sub), keepAliveMs: this.keepAliveMs(), ready });
    set.add(sub);
    return sub;
  }

  /** A follower whose reader went away, by its id (`Subscriber.id`): closed and forgotten; any other id is nothing to close. */
  unfollow(runId: string, id: string) {
    const sub = [...(this.subs.get(runId) ?? [])].find((s) => s.id === id);
    if (!sub) return;
    sub.close();
    this.forget(runId, sub);
  }

  private forget(runId: string, sub: Subscriber) {
    const set = this.subs.get(runId);
    set?.delete(sub);
    if (set?.size === 0) this.subs.delete(runId);
  }

  publish(runId: string, entries: LedgerEntry[]) {
    if (entries.length === 0) return;
    const frames = entries.map(frameOf);
    this.remember(runId, frames);
    const set = this.subs.get(runId);
    if (!set) return;
    for (const f of frames) for (const s of set) s.push(f);
  }

  /** The run is over: `last` (its final entries, if not published yet) then `end` to every follower. */
  end(runId: string, status: string, last: LedgerEntry[] = []) {
    this.publish(runId, last);
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

  /**
   * SSE of a run for a new follower, after the frames it has (`after`): the
   * ledger so far, then live frames until the run ends; null for a run this
   * host does not know. It follows before anything is read, so no end
   * published meanwhile is missed: a run that ended before shows as ended in
   * its row. A run this object has (`hasRun`) is replayed from memory when its
   * ledger fits there, at no database round trip; any other run not ended
   * (not handed to this object yet, or lost with an earlier instance) is
   * followed until this object ends it. "full" when the run has MAX_FOLLOWERS_PER_RUN already.
   */
  async follow(runId: string, hasRun: () => Promise<boolean>, runs: ReturnType<typeof runsStore>, after = 0): Promise<Subscriber | null | "full"> {
    if ((this.subs.get(runId)?.size ?? 0) >= MAX_FOLLOWERS_PER_RUN) return "full";
    let decided!: () => void;
    // Its replay is read once the run is known ended or not: read after the end, the ledger is final.
    const sub = this.subscribe(runId, ledgerSource(runs, runId), after, new Promise<void>((r) => (decided = r)));
    try {
      if (await hasRun()) return sub;
      const row = await runs.get(runId);
      if (!row) {
        this.forget(runId, sub);
        return null;
      }
      if ((ENDED as readonly string[]).includes(row.status)) {
        sub.end(row.status);
        this.forget(runId, sub);
      }
      return sub;
    } catch (err) {
      this.forget(runId, sub);
      throw err;
    } finally {
      decided();
    }
  }
}
