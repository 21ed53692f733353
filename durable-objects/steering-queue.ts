import { writeAll, type Db } from "../src/db/client";
import { mayHaveApplied } from "../src/db/executor";
import { loggedError } from "../src/lib/describe-error";
import { jsonByteLength } from "../src/protocol/common";
import type { SteeringPort } from "../src/host-api/actions/index";
import type { SteeringInputItem } from "../src/protocol/host-api-results";
import type { RunJob } from "../src/run/job";
import { steeringItemOf, steeringOutcomeInsert } from "../src/run/steering";
import { dropStatements, recordPull } from "../src/run/steering-pull";
import { releaseStatements } from "../src/run/steering-release";
import { DroppedClaims, type DecideAgain } from "./dropped-claims";
import { inTurnByKey } from "./serial-decisions";
import { ClaimKeys } from "./claim-keys";
import { claimStatements, itemOf, type ClaimInFlight, type UnsettledClaim } from "./claim-notes";
import { RareKeys } from "./rare-keys";
import { amendQueued } from "./steering-amend";
import type { MessageEdit } from "../src/run/edited-input";
import { bodyKeyOf, deleteAll, isWhole, messagesOf, prefixOf, putAll, QUEUE, stored, stubOf, withinBytes, type Queued } from "./steering-storage";

/** PROTOCOL §10: a run holds at most this many claimed messages; more fall back to the strategy. */
export const STEERING_QUEUE_CAP = 100;

/**
 * What one steering.pull answers at most past its first item (the items as JSON): the answer crosses the object's RPC
 * (32 MiB at most). What is left stays queued for the next pull; nothing taken is lost on the way.
 */
export const STEERING_PULL_MAX_BYTES = 4 * 1024 * 1024;

/** Ended runs whose unpulled claims are still to be recorded as dropped. */
const DROP_LATER = "steer-drop:";
/** Claims whose write got no answer, by the claimed event's own run id (see `claim`). */
const UNSETTLED = "steer-unsettled:";
/** Items taken off a queue whose outcome is being written, under this prefix and their queue key (see `take`). */
const TAKING = "steer-taking:";
/** Claims being written, by the claimed event's own run id (see `claim`). */
const CLAIMING = "steer-claiming:";
/** Runs an interrupt stopped, by run id: their unpulled claims are dropped and not decided again (see `moot`). */
const MOOT = "steer-moot:";

/**
 * A run's steering queue in the Durable Object's storage: claimed messages in
 * claim order, kept durably so that a run lost with its instance can still
 * record what it never pulled, and have it decided anew (dropped-claims.ts).
 */
export class SteeringQueue {
  private readonly keys: ClaimKeys;
  /** The `TAKING` keys of this instance's own takes still writing: any other is an earlier instance's, lost with it. */
  private readonly inFlight = new Set<string>();
  /** Whether drops (or claims an earlier instance was writing) may be waiting in storage: unknown (true) until this instance has looked. */
  private dropsWaiting = true;
  /** Takes of one run one at a time: a pull that fails puts its items back before the next pull looks (claim order). */
  private readonly inTurn = inTurnByKey();
  /** Marks this instance's claims in flight: one with another mark was being written by an instance that died. */
  private readonly instance = crypto.randomUUID();
  /** This instance's claims in flight (the claimed events' own run ids). */
  private readonly writing = new Set<string>();
  private readonly dropped: DroppedClaims;
  /** Claims whose write went unanswered, and interrupts' marks: rare, so every run's end asks memory, not storage. */
  private readonly unsettled: RareKeys;
  private readonly mooted: RareKeys;

  /**
   * `completed`: a claim completed late discarded the claimed event's own run (its followers hear it was steered).
   * `released`: a claim an earlier instance died writing was taken back (`retryDrops`): its event's run to decide anew,
   * unless decided meanwhile (the event sent again took the claim back too, and was steered or rejected: a redelivery);
   * `revision`: the version of the edit its words are (a dropped claim decided anew as edited), kept with them.
   * `again`: how a dropped claim's event is decided anew (dropped-claims.ts).
   */
  constructor(
    private readonly storage: DurableObjectStorage,
    private readonly completed: (runId: string) => void = () => {},
    private readonly released: (job: RunJob, revision?: number) => Promise<unknown> = async () => {},
    again?: DecideAgain,
  ) {
    this.dropped = new DroppedClaims(storage, again);
    [this.unsettled, this.mooted] = [new RareKeys(storage, UNSETTLED), new RareKeys(storage, MOOT)];
    this.keys = new ClaimKeys(storage, TAKING);
  }

  async size(runId: string): Promise<number> {
    return (await this.storage.list({ prefix: prefixOf(runId) })).size;
  }

  /**
   * `job`'s event joins `target`'s queue once the claim is recorded (its own run discarded), so the run never pulls
   * a claim that may yet be refused. A write that got no answer may have committed: the item is queued all the
   * same (never silently lost) and the claim remembered, so the event sent again completes this claim
   * (`completeClaim`) instead of making a second one. A target that can no longer pull it once recorded (`pulls`,
   * asked in the same tick as the item would be queued) never had it: the claim is taken back (`release`), and the
   * answer says so; the caller decides the event anew.
   */
  async claim(db: Db, job: RunJob, target: RunJob, now: number, pulls: () => boolean = () => true, revision?: number): Promise<"queued" | "released"> {
    const item = steeringItemOf(job, target, now);
    // Its place in claim order is taken now, whichever claim's write is answered first.
    const key = await this.keys.next(target.runId);
    const claim: ClaimInFlight = { job, target: { runId: target.runId, runner: { runnerId: target.runner.runnerId } }, at: now, key, instance: this.instance, revision };
    // Durable before the write leaves (the output gate holds it): should this instance die before the answer, the next one takes the claim back (`retryDrops`).
    this.writing.add(job.runId);
    this.dropsWaiting = true;
    void this.storage.put(`${CLAIMING}${job.runId}`, claim);
    // Not awaited below: the output gate holds the answer until the item is durable.
    try {
      await writeAll(db, claimStatements(db, job.event.event_id, job.runId, item));
    } catch (err) {
      if (mayHaveApplied(err)) this.standUnsettled(claim);
      this.settled(job.runId);
      throw err;
    }
    if (!pulls()) return (await this.release(db, claim)) ? "released" : "queued";
    void this.enqueue(claim);
    this.settled(job.runId);
    return "queued";
  }

  /** A claim whose write may have committed stands: queued, and remembered so that its write is made again (`completeClaim`). */
  private standUnsettled(claim: ClaimInFlight): void {
    void this.enqueue(claim);
    void this.storage.put<UnsettledClaim>(`${UNSETTLED}${claim.job.runId}`, { eventId: claim.job.event.event_id, item: itemOf(claim) });
    this.unsettled.added(`${UNSETTLED}${claim.job.runId}`);
  }

  /** A claim in flight is answered: in the same tick as what it left (queued, or remembered). */
  private settled(runId: string): void {
    this.writing.delete(runId);
    void this.storage.delete(`${CLAIMING}${runId}`);
  }

  /**
   * A claim taken back: its event bound to its own run again, to be decided anew. If that cannot be recorded the
   * claim stands (queued: its target's drop records it, and makes its write again, as the release may have applied).
   * Answers whether it was taken back.
   */
  private async release(db: Db, claim: ClaimInFlight): Promise<boolean> {
    const { job } = claim;
    try {
      await writeAll(db, releaseStatements(db, job, claim.target.runId));
      return true;
    } catch (err) {
      console.error(`run ${job.runId}: claim into ${claim.target.runId} not taken back: ${loggedError(err)}`);
      this.standUnsettled(claim);
      return false;
    } finally {
      this.settled(job.runId);
    }
  }

  /** A claim an earlier instance died writing (the write may have committed), taken back; false if none. Throws when the database cannot take it now. */
  private async releaseOrphan(db: Db, runId: string): Promise<boolean> {
    const key = `${CLAIMING}${runId}`;
    const claim = await this.storage.get<ClaimInFlight>(key);
    if (!claim || claim.instance === this.instance) return false;
    await writeAll(db, releaseStatements(db, claim.job, claim.target.runId));
    await this.storage.delete(key);
    return true;
  }

  /** The claim under its key, its event's job apart (one atomic write): what a pull gets, and what a drop has decided anew. */
  private enqueue(claim: ClaimInFlight): Promise<void> {
    const { stub, body } = stored(claim.job, itemOf(claim), claim.revision);
    return this.storage.put({ [claim.key]: stub, [bodyKeyOf(claim.key)]: body });
  }

  /**
   * A claim of `runId`'s event whose write got no answer: recorded now, and the run that holds it named. Null when
   * there is none. Throws when the database still cannot take it (the claim stays to complete).
   */
  async completeClaim(db: Db, runId: string): Promise<string | null> {
    // Its claim was being written when an earlier instance died: never answered, it is taken back (the event's run decided as any other).
    if (await this.releaseOrphan(db, runId)) return null;
    const key = `${UNSETTLED}${runId}`;
    const claim = (await this.unsettled.has(key)) ? await this.storage.get<UnsettledClaim>(key) : undefined;
    if (!claim) return null;
    await writeAll(db, claimStatements(db, claim.eventId, runId, claim.item));
    const deleted = this.storage.delete(key);
    this.unsettled.removed(key);
    await deleted;
    this.completed(runId);
    return claim.item.claimed_run_id;
  }

  /**
   * Take items off a run's queue and record what became of them (pulled by the run, or dropped at its end). They leave
   * the queue before the libSQL write (storage calls do not open the input gate, the write does), so a concurrent pull
   * or drop never sees them too; they are put back if the write fails. Until the write is answered (a pull's: until its
   * answer leaves) they are kept under `TAKING` keys: should the instance die meanwhile (its pull never answered), the
   * run's drop finds and records them.
   * A pull answers none whose message is marked recalled in libSQL (steering-pull.ts): its recall's work here not done.
   * One that found some so takes the next ones in their place, up to its `limit` and `maxBytes`: an empty answer tells
   * the runner its queue is empty, and a short one that nothing more fitted.
   */
  take(db: Db, run: RunJob, outcome: "injected" | "dropped", limit?: number, maxBytes = Infinity): Promise<SteeringInputItem[]> {
    return this.inTurn(run.runId, async () => {
      if (outcome === "dropped") return (await this.takeNow(db, run, outcome, { limit, maxBytes })).items;
      const answer: SteeringInputItem[] = [];
      // Rounds recorded keep their `TAKING` keys (and messages) until the answer leaves: lost with the instance during a later round, the drop still finds them.
      const held: string[] = [];
      try {
        // Ends: each round takes at least one entry off the queue, or finds none that fits.
        for (let room = maxBytes; ; ) {
          const round = this.takeNow(db, run, outcome, { limit: limit === undefined ? undefined : limit - answer.length, maxBytes: room, firstAlways: !answer.length, unlessRecalled: true, held });
          // A later round refused puts its own items back; those taken before are recorded injected, and answered.
          const { items, taken } = answer.length ? await round.catch((err: Error) => (console.error(`run ${run.runId}: steering pull answered short: ${loggedError(err)}`), { items: [], taken: 0 })) : await round;
          answer.push(...items);
          // None found recalled: this round took all it could.
          if (!taken || items.length === taken || answer.length === limit) return answer;
          room -= items.reduce((sum, item) => sum + jsonByteLength(item), 0);
        }
      } finally {
        for (const k of held) this.inFlight.delete(k);
        await deleteAll(this.storage, held);
      }
    });
  }

  /**
   * A claimed message its user recalled before the run pulled it: taken off the queue as a pull takes items, and
   * recorded `steering.dropped` with `reason: "recalled"`. False when it is not queued (pulled or dropped already, or
   * withdrawn by this recall delivered before).
   */
  withdraw(db: Db, run: RunJob, eventId: string): Promise<boolean> {
    return this.inTurn(run.runId, async () => (await this.takeNow(db, run, "dropped", { only: eventId, reason: "recalled" })).taken > 0);
  }

  /**
   * The first claimed message, taken off the queue for the run to answer as its own message (that one was recalled
   * before the run began): recorded `steering.injected`, as a pull of it would be. Null when none is queued. One
   * marked recalled in libSQL (its recall's work here not done) is recorded dropped, as a pull's is: the next one
   * takes its place.
   */
  promote(db: Db, run: RunJob): Promise<{ item: SteeringInputItem; revision?: number } | null> {
    return this.inTurn(run.runId, async () => {
      // Ends: each round takes its entry off the queue.
      for (;;) {
        const [first] = await this.storage.list<Queued>({ prefix: prefixOf(run.runId), limit: 1 });
        if (!first) return null;
        const { items: [item], taken } = await this.takeNow(db, run, "injected", { only: stubOf(first[1]).event_id, unlessRecalled: true });
        if (item) return { item, revision: stubOf(first[1]).revision };
        if (!taken) return null;
      }
    });
  }

  /** A claimed message its user edited before the run pulled it: the pull gets its newest words (steering-amend.ts). */
  amend(runId: string, eventId: string, edit: MessageEdit): Promise<boolean> {
    return this.inTurn(runId, () => amendQueued(this.storage, runId, eventId, edit));
  }

  /**
   * Whether `runId`'s event waits to be decided anew: claimed and dropped unpulled (dropped-claims.ts), or claimed by a
   * write an earlier instance died making (the alarm takes it back and decides it, `retryDrops`).
   */
  async awaitsDecision(runId: string): Promise<boolean> {
    const claiming = await this.storage.get<ClaimInFlight>(`${CLAIMING}${runId}`);
    return (claiming !== undefined && claiming.instance !== this.instance) || this.dropped.holds(runId);
  }

  /** The run whose queue holds `eventId`'s claim, not pulled yet; null if none does. */
  async claimantOf(eventId: string): Promise<string | null> {
    for (const [, v] of await this.storage.list<Queued>({ prefix: QUEUE })) if (stubOf(v).event_id === eventId) return stubOf(v).claimed_run_id;
    return null;
  }

  /** `only`: that event's claim alone (whatever `limit`), `reason` on its record. `again`: a drop's claims are to be decided anew (dropped-claims.ts). `unlessRecalled`: a pull's (`take`), or a promotion's. `held`: what is done with once recorded, left to the caller to delete. */
  private async takeNow(db: Db, run: RunJob, outcome: "injected" | "dropped", opts: { limit?: number; maxBytes?: number; firstAlways?: boolean; only?: string; reason?: "recalled"; again?: boolean; unlessRecalled?: boolean; held?: string[] }): Promise<{ items: SteeringInputItem[]; taken: number }> {
    const queued = [...(await this.storage.list<Queued>({ prefix: prefixOf(run.runId), limit: opts.only === undefined ? opts.limit : undefined }))];
    const entries = withinBytes(opts.only === undefined ? queued : queued.filter(([, v]) => stubOf(v).event_id === opts.only), opts.maxBytes ?? Infinity, opts.firstAlways);
    // A drop also records what an earlier instance's pull had taken when it died: its runner never had the answer.
    const orphans = outcome === "dropped" && opts.only === undefined ? await this.orphansOf(run.runId) : [];
    // A run's whole drop is remembered (`ending`) until its records and what follows them are stored: lost with this instance midway, the next one finishes it (retryDrops).
    const whole = outcome === "dropped" && opts.only === undefined ? `${DROP_LATER}${run.runId}` : null;
    if (!entries.length && !orphans.length) return whole ? this.storage.delete(whole).then(() => ({ items: [], taken: 0 })) : { items: [], taken: 0 };
    // Only a pull reads the messages: what its answer carries.
    const items = outcome === "injected" ? await messagesOf(this.storage, entries) : [];
    const taking = entries.map(([k, v]): [string, Queued] => [`${TAKING}${k}`, v]);
    for (const [k] of taking) this.inFlight.add(k);
    let recalled = new Set<string>();
    try {
      // All in one tick: one atomic write.
      await Promise.all([putAll(this.storage, whole ? [...taking, [whole, run]] : taking), deleteAll(this.storage, entries.map(([k]) => k))]);
      try {
        const claims = [...entries, ...orphans].map(([, v]) => stubOf(v));
        if (opts.unlessRecalled) recalled = await recordPull(db, claims, run);
        else if (outcome === "dropped" && !opts.reason) await writeAll(db, dropStatements(db, claims, run));
        else await writeAll(db, claims.map((claim) => steeringOutcomeInsert(db, outcome, claim, run, opts.reason)));
      } catch (err) {
        // Put back under their own keys (claim order is kept); their messages never left.
        if (entries.length) await Promise.all([putAll(this.storage, entries), deleteAll(this.storage, taking.map(([k]) => k))]);
        throw err;
      }
      const taken = [...entries, ...orphans.map(([k, v]): [string, Queued] => [k.slice(TAKING.length), v])];
      // Their events' jobs stay (under their body keys) for them to be decided anew; a recalled message's, or an earlier release's claim, goes.
      const again = opts.again ? taken.filter(([, v]) => !isWhole(v) && v.job) : [];
      const kept = new Set(again.map(([k]) => k));
      const done = [...taking.map(([k]) => k), ...orphans.map(([k]) => k), ...taken.filter(([k]) => !kept.has(k)).map(([k]) => bodyKeyOf(k)), ...(whole ? [whole] : [])];
      opts.held?.push(...done);
      // One tick: one atomic write.
      await Promise.all([deleteAll(this.storage, opts.held ? [] : done), this.dropped.keep(again.map(([k, v]) => [k, stubOf(v)]))]);
    } finally {
      for (const [k] of taking) if (!opts.held?.includes(k)) this.inFlight.delete(k);
    }
    return { items: items.filter((item) => !recalled.has(item.event.event_id)), taken: entries.length };
  }

  /** Claims an earlier instance was taking off `runId`'s queue when it died (their outcome's write never answered there). */
  private async orphansOf(runId: string): Promise<[string, Queued][]> {
    const taking = await this.storage.list<Queued>({ prefix: `${TAKING}${prefixOf(runId)}` });
    return [...taking].filter(([k]) => !this.inFlight.has(k));
  }

  /** What a run's `steering.pull` calls: its queue's items in claim order, each recorded as injected. */
  portFor(db: Db, run: RunJob): SteeringPort {
    const pull: SteeringPort["pull"] = (mode, limit) => this.take(db, run, "injected", mode === "one-at-a-time" ? 1 : (limit ?? STEERING_QUEUE_CAP), STEERING_PULL_MAX_BYTES);
    return { pull };
  }

  /**
   * An ended run's unpulled claims, each recorded as `steering.dropped`, and
   * its claims whose write got no answer completed (when that write applied,
   * the event sent again is answered without reaching this object: nothing
   * else would ever remove them). Never throws: if the database cannot take
   * the records now, the run is remembered (durably) for `retryDrops`.
   * Answers whether they were recorded.
   */
  async drop(db: Db, run: RunJob): Promise<boolean> {
    try {
      // Before the drop keeps them to be decided anew: that decision, finding one still unsettled, would complete it into this ended run.
      for (const [key, claim] of (await this.unsettled.any()) ? await this.storage.list<UnsettledClaim>({ prefix: UNSETTLED }) : []) {
        if (claim.item.claimed_run_id === run.runId) await this.completeClaim(db, key.slice(UNSETTLED.length));
      }
      const again = !(await this.mooted.has(`${MOOT}${run.runId}`));
      await this.inTurn(run.runId, () => this.takeNow(db, run, "dropped", { again }));
      if (!again) {
        void this.storage.delete(`${MOOT}${run.runId}`);
        this.mooted.removed(`${MOOT}${run.runId}`);
      }
      return true;
    } catch (err) {
      console.error(`run ${run.runId}: steering drop not recorded yet: ${loggedError(err)}`);
      await this.storage.put(`${DROP_LATER}${run.runId}`, run);
      this.dropsWaiting = true;
      return false;
    }
  }

  /**
   * `run` ended and leaves the run table: its drop is owed from that same write (called in its tick), so an instance
   * lost before the drop is recorded (its drop waiting for a pull's write, say) leaves it to the next one (`retryDrops`).
   */
  ending(run: RunJob): void {
    void this.storage.put(`${DROP_LATER}${run.runId}`, run);
  }

  /**
   * An interrupt stopped `runId` (or dropped it before it began): the newer question moots what it claimed and never
   * pulled, which is dropped and not decided anew (README "Strategy"): that would cancel or precede the newer answer.
   * Durable, so the drop sees it whichever instance records it.
   */
  moot(runId: string): void {
    void this.storage.put(`${MOOT}${runId}`, true);
    this.mooted.added(`${MOOT}${runId}`);
  }

  /**
   * Records the drops `drop` could not, takes back the claims an earlier instance died writing (their events' runs
   * decided anew: the ingress call that made them failed with that instance), and decides anew the dropped claims still
   * waiting (dropped-claims.ts); answers whether some are still waiting (or claims still being written: should this
   * instance die, the alarm wakes the next). Cheap when none are. Only the alarm calls it: it waits for the decisions.
   */
  async retryDrops(db: Db): Promise<boolean> {
    if (this.dropsWaiting) await this.retryWaiting(db);
    return (await this.dropped.answer(db)) || this.dropsWaiting;
  }

  private async retryWaiting(db: Db): Promise<void> {
    // Cleared before listing: a drop that fails from here on (this retry's, or another run's meanwhile) sets it again.
    this.dropsWaiting = false;
    for (const [key, run] of await this.storage.list<RunJob>({ prefix: DROP_LATER })) {
      if (await this.drop(db, run)) await this.storage.delete(key);
    }
    for (const [key, claim] of await this.storage.list<ClaimInFlight>({ prefix: CLAIMING })) {
      const runId = key.slice(CLAIMING.length);
      try {
        if (await this.releaseOrphan(db, runId)) void this.released(claim.job, claim.revision).catch((err: Error) => console.error(`run ${runId}: not decided again: ${loggedError(err)}`));
      } catch (err) {
        console.error(`run ${runId}: claim into ${claim.target.runId} not taken back yet: ${loggedError(err)}`);
        this.dropsWaiting = true;
      }
    }
    if (this.writing.size) this.dropsWaiting = true;
  }
}
