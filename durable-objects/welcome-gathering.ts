import type { Config } from "../src/env";
import type { RunJob } from "../src/run/job";
import type { RunTableStore } from "./run-table";
import { decidedWithoutRun, type DispatchResult, type EventDecision, type RunTable, type StoredRun } from "./scheduling";
import { asWelcomeHead, joinWelcome, welcomeRunFor } from "./welcomes";

/**
 * A conversation's welcome runs gathering Slack joins (welcomes.ts). A join's decision is taken in turn with the
 * conversation's others, but its record is written outside that turn, before its own answer: a burst of hundreds of
 * joins would otherwise wait for one database round trip each, in line, and the last ones outlast Slack's 3 s. The
 * welcome holds each join before its record is written; its start writes them all again (run/welcome-decisions.ts).
 */
export class WelcomeGathering {
  /** Records of joins decided, being written (or whose write failed), by the join's own run id, until its answer takes them. */
  private readonly writing = new Map<string, Promise<void>>();

  constructor(
    private readonly runs: RunTableStore,
    private readonly config: () => Config,
    /** Whether a stored run may still take joins: not executing, not being cancelled. */
    private readonly gathering: (runId: string) => boolean,
    /** Records the decision of an event left without a run of its own. */
    private readonly record: (job: RunJob, decision: EventDecision) => Promise<void>,
  ) {}

  /** A new run as it waits: a Slack join's waits for the joins that come with it. */
  head(run: StoredRun, now: number): StoredRun {
    return asWelcomeHead(run, this.config().JOIN_WAIT_MS, now);
  }

  /** In turn: a Slack join joins its channel's welcome run, if one gathers. Answers its decision (its record under way), or null. */
  join(table: RunTable, job: RunJob, now: number): DispatchResult | null {
    const welcome = welcomeRunFor(table, job, this.gathering);
    if (!welcome) return null;
    const decision = joinWelcome(welcome, job, this.config().JOIN_WAIT_MS, now, this.store);
    const written: Promise<void> = this.record(job, decision).then(() => {
      // Written: nothing left for its answer to hear.
      if (this.writing.get(job.runId) === written) this.writing.delete(job.runId);
    });
    // A failure is its answer's (taken by `answered`), not an unhandled rejection meanwhile.
    written.catch(() => {});
    this.writing.set(job.runId, written);
    return decidedWithoutRun(decision);
  }

  /** An event's decision once its record is written: a join's that failed fails its answer, and the platform sends it again. */
  async answered<T>(runId: string, decided: Promise<T>): Promise<T> {
    const result = await decided;
    const written = this.writing.get(runId);
    if (!written) return result;
    try {
      await written;
    } finally {
      if (this.writing.get(runId) === written) this.writing.delete(runId);
    }
    return result;
  }

  /**
   * A join joined the run: stored (its lists' last pages, not the whole: welcome-pages.ts). The scheduler is not woken: the run only waits longer, and a scheduler timed for its
   * earlier start finds it waiting still and looks again then (hundreds of joins would otherwise wake it hundreds of times).
   */
  private readonly store = (key: string, run: StoredRun): void => {
    void this.runs.put(key, run); // not awaited: the output gate holds the reply until the write is durable
  };
}
