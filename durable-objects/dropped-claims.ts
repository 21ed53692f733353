import { writeAll, type Db } from "../src/db/client";
import { loggedError } from "../src/lib/describe-error";
import type { RunJob } from "../src/run/job";
import type { ClaimRef } from "../src/run/steering";
import { asAgentIsNow, asLastEdited, releaseStatements } from "../src/run/steering-release";
import { bodyKeyOf, chunks, prefixOf, type ClaimStub } from "./steering-storage";

/** Claims dropped unpulled whose messages are still to be decided anew, in claim order (time, then counter, then run). */
const AGAIN = "steer-again:";

/** One such claim: what it was, and the key of its event's job (the queue's body key, kept until it is decided). */
interface Dropped {
  ref: ClaimRef;
  body: string;
  /** Its event's own run (its job's), so `holds` reads no body; absent in ones kept by earlier releases. */
  runId?: string;
}

export interface DecideAgain {
  /** Work in turn with the conversation's decisions. */
  inTurn: <T>(work: () => Promise<T>) => Promise<T>;
  /** The event decided as its redelivery is (unless decided since: a claim left unsettled is completed), inside that turn; `revision`: the version of the edit its words are. */
  decide: (job: RunJob, revision?: number) => Promise<unknown>;
  /** Some wait: the scheduler is to look (its alarm decides them, `answer`). */
  wake: () => void;
  /** How long before an alarm looks again while some wait (DB_RETRY_PAUSE_MS). */
  pauseMs: () => number;
}

/**
 * Messages a run claimed and ended without pulling (README "Steering"): once their `steering.dropped` records are
 * written, each is taken back (its event bound to its own run again) and decided anew, in claim order, so the first
 * starts a run (or waits its turn) and the later ones are claimed by it, as if they had just arrived. Kept durably from
 * the drop's own storage write until decided, so a restart or the database away delays them, never loses them; each
 * is removed once its decision is taken, and one decided again (a pass cut short) finds it decided (a redelivery's
 * checks). Claims queued by an earlier release (their bodies are items, not jobs) are dropped as they were.
 * Only the scheduler decides them, before it starts runs: the first one's run begins with the later ones in its queue.
 * Not decided again: a message whose agent was deleted, disabled or moved to a runner no longer registered since
 * (nothing would answer it); one its user recalled, or claimed by a run an interrupt stopped, is never kept here, and
 * one recalled while kept here is not taken back. One edited meanwhile is decided with its newest words.
 */
export class DroppedClaims {
  /** Whether some may wait: unknown (true) until this instance has looked. */
  private waiting = true;

  constructor(
    private readonly storage: DurableObjectStorage,
    private readonly deps: DecideAgain = { inTurn: (work) => work(), decide: async () => {}, wake: () => {}, pauseMs: () => 5_000 },
  ) {}

  /** Called in the tick of the drop's last storage write (one atomic write): the dropped claims, by queue key, their bodies kept. */
  keep(claims: [queueKey: string, stub: ClaimStub][]): Promise<unknown> {
    if (!claims.length) return Promise.resolve();
    this.waiting = true;
    const entries = claims.map(([key, stub]): [string, Dropped] => [
      `${AGAIN}${key.slice(prefixOf(stub.claimed_run_id).length)}:${stub.claimed_run_id}`,
      { ref: stub, body: bodyKeyOf(key), ...(stub.own_run_id === undefined ? {} : { runId: stub.own_run_id }) },
    ]);
    return Promise.all(chunks(entries).map((part) => this.storage.put(Object.fromEntries(part)))).then(() => {
      this.deps.wake();
      return this.armed();
    });
  }

  /** Whether `runId`'s event waits here to be decided anew: its run is `created` again in libSQL, and none but this decision may end it. */
  async holds(runId: string): Promise<boolean> {
    if (!this.waiting) return false;
    // Only one kept by an earlier release (no run id of its own) has its body read.
    for (const [, dropped] of await this.storage.list<Dropped>({ prefix: AGAIN })) if ((dropped.runId ?? (await this.storage.get<RunJob>(dropped.body))?.runId) === runId) return true;
    return false;
  }

  /**
   * Decides the waiting ones anew, in turn with the decisions; answers whether some still wait (the database away: the
   * scheduler looks again after a pause). Never throws. The scheduler's alone: a decision awaiting it would wait for itself.
   */
  async answer(db: Db): Promise<boolean> {
    if (!this.waiting) return false;
    return this.deps.inTurn(async () => {
      // Cleared before listing: one kept from here on is looked at by the next pass.
      this.waiting = false;
      try {
        await this.answerAll(db);
      } catch (err) {
        console.error(`steered messages not decided again yet: ${loggedError(err)}`);
        this.waiting = true;
      }
      return this.waiting;
    });
  }

  /**
   * An alarm due by a pause's end while some wait: should this instance die before they are decided (an alarm
   * delivered meanwhile is taken as handled: the scheduler was running), the next one decides them.
   */
  private async armed(): Promise<void> {
    const due = Date.now() + this.deps.pauseMs();
    const at = await this.storage.getAlarm();
    if (at === null || at > due) await this.storage.setAlarm(due);
  }

  /** In claim order; the first that cannot be decided now stops the pass, so none overtakes it. */
  private async answerAll(db: Db): Promise<void> {
    const waiting = await this.storage.list<Dropped>({ prefix: AGAIN });
    if (waiting.size) await this.armed();
    for (const [key, dropped] of waiting) {
      const job = await this.storage.get<RunJob>(dropped.body);
      const now = job ? await asAgentIsNow(db, job) : null;
      if (now) {
        // Idempotent: a pass that died after this (or after the decision) finds the event bound to its own run, or decided.
        // Recalled since the drop, it is not taken back, and its decision finds it decided (steered into the run that dropped it).
        await writeAll(db, releaseStatements(db, now, dropped.ref.claimed_run_id, { unlessRecalled: true }));
        const last = await asLastEdited(db, now);
        await this.deps.decide(last.job, last.revision);
      } else if (job) console.log(`run ${job.runId}: its message, dropped by ${dropped.ref.claimed_run_id}, is not decided again: its agent can no longer answer it`);
      await this.storage.delete([key, dropped.body]);
    }
  }
}
