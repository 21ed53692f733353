import type { Db } from "../src/db/client";
import { endUnhandedRun } from "../src/run/host-end";
import type { UnansweredEnds } from "../src/run/unanswered-ends";
import type { RunJob } from "../src/run/job";
import type { LiveHub } from "../src/run/live";
import type { RunOutcome } from "../src/stores/runs";
import type { DispatchResult } from "./scheduling";

const PREFIX = "unhanded-ended:";
/** Far longer than ingress takes from recording a run to handing it over (one database answer, one RPC). */
const KEEP_MS = 60 * 60_000;
/** Storage calls take at most 128 keys. */
const MAX_KEYS = 128;

/** When a run was ended here, and how. */
interface Ended {
  at: number;
  status: string;
}

/**
 * Runs this conversation ended while only libSQL knew them: an operator's cancel that came after ingress recorded the
 * run but before its hand-over reached this object, or the cron's never-handed-over sweep. That hand-over may still
 * come (ingress's dispatch was on its way): it must then start, steer or interrupt nothing. The ids are kept in the
 * object's storage, so a hand-over reaching a fresh instance is refused too, and read into memory once per instance.
 */
export class UnhandedRuns {
  private ended?: Promise<Map<string, Ended>>;

  constructor(
    private readonly storage: DurableObjectStorage,
    private readonly live: LiveHub,
    /** Resolves a placeholder a chat surface still shows for a run cancelled before it started (Discord's "thinking…"). */
    private readonly noticeCancelled: (job: RunJob) => void,
    /** The instance's ends whose write got no answer (their lines logged by whoever finds them applied). */
    private readonly unanswered?: UnansweredEnds,
  ) {}

  /** Ends a run left `created` in libSQL only, if it has not started (its followers hear so); whether this ended it. */
  async end(db: Db, runId: string, outcome: RunOutcome): Promise<boolean> {
    const entry = await endUnhandedRun(db, runId, outcome, this.unanswered);
    if (!entry) return false;
    await this.remember(runId, outcome.status);
    this.live.end(runId, outcome.status, [entry]);
    return true;
  }

  /**
   * The answer to a hand-over of a run ended here before it came, or null for any other run: `queued` (it was dropped
   * while it waited), and nothing is decided for its event. A chat placeholder waiting for it is resolved, as for any
   * run cancelled before it started.
   */
  async lateHandOver(job: RunJob): Promise<DispatchResult | null> {
    const ended = (await this.load()).get(job.runId);
    if (!ended) return null;
    if (ended.status === "cancelled") this.noticeCancelled(job);
    return { disposition: "queued", runId: job.runId };
  }

  private load(): Promise<Map<string, Ended>> {
    this.ended ??= this.storage.list<Ended>({ prefix: PREFIX }).then(
      (stored) => {
        const ended = new Map([...stored].map(([key, e]) => [key.slice(PREFIX.length), e]));
        // A conversation that ended one such run and then went quiet is cleared by its next instance's first hand-over.
        void this.forgetStale(ended, Date.now()).catch(() => undefined);
        return ended;
      },
      (err: unknown) => {
        // Not kept: the next hand-over reads storage again.
        this.ended = undefined;
        throw err;
      },
    );
    return this.ended;
  }

  private async remember(runId: string, status: string): Promise<void> {
    const ended = await this.load();
    const now = Date.now();
    ended.set(runId, { at: now, status });
    await Promise.all([this.storage.put<Ended>(`${PREFIX}${runId}`, { at: now, status }), this.forgetStale(ended, now)]);
  }

  /** Forgotten after a while: cancels of runs never handed over are rare, and so is each one's late hand-over. */
  private async forgetStale(ended: Map<string, Ended>, now: number): Promise<void> {
    const stale = [...ended].filter(([, e]) => now - e.at > KEEP_MS).slice(0, MAX_KEYS).map(([id]) => id);
    for (const id of stale) ended.delete(id);
    if (stale.length) await this.storage.delete(stale.map((id) => `${PREFIX}${id}`));
  }
}
