import { DurableObject } from "cloudflare:workers";
import { writeAll } from "../src/db/client";
import { dbOf } from "../src/db/connect";
import { configOf, type Env } from "../src/env";
import { chatReplyDeps } from "../src/delivery/session";
import { handleHostApiCall, parseHostApiBody, refuseBody, refuseCallsInFlight, type HostApiBody, type HostApiReply } from "../src/host-api/handle";
import { authorizeUpload, changeUploadBudget, type UploadAuthorization, type UploadRequest } from "../src/host-api/upload";
import { RunClaims } from "../src/run/claim";
import { endRunAsHost } from "../src/run/host-end";
import { endLostRun, type UnrecordedRun } from "../src/run/lost-run";
import { UnansweredEnds } from "../src/run/unanswered-ends";
import { arrivalStrategy, type RunJob } from "../src/run/job";
import { LiveHub } from "../src/run/live";
import { decidedWithoutOwnRun } from "../src/stores/event-log";
import { runsStore, type LedgerEntry } from "../src/stores/runs";
import { SessionRegistry } from "./run-session";
import { ALARM_BUDGET_MS, watchdogAt } from "./timing";
import { ArrivalKeys, idleWakeAt, nextWakeAt, repliesWhereMessage, startable, rejectionOf, steeringTarget, waitingRun, willSteer, withoutLost, decidedWithoutRun, type CancelOutcome, type DispatchResult, type EventDecision, type StoredRun } from "./scheduling";
import { slideDebounce } from "./debounce";
import { interrupt, type InterruptDeps } from "./interrupts";
import { ChangeSignal } from "./change-signal";
import { RunTableStore } from "./run-table";
import { SerialDecisions, sharedByKey } from "./serial-decisions";
import { SettlingWork } from "./settling-work";
import { STEERING_QUEUE_CAP, SteeringQueue } from "./steering-queue";
import { PendingReplies } from "./pending-replies";
import { AlbumGathering } from "./album-gathering";
import { WelcomeGathering } from "./welcome-gathering";
import { UnhandedRuns } from "./unhanded-runs";
import { UnhandedEdits } from "./unhanded-edits";
import { endLostRuns } from "./lost-runs";
import { reviseWaiting, type MessageRevision, type RevisionDeps, type RevisionOutcome } from "./waiting-revisions";
import { abortActive } from "./active-runs";
import { decidedAlready } from "./redelivery";
import { endNeverHandedOver } from "./never-handed-over";
import { runOne, type RunOneDeps } from "./run-one";
import { cancelNotActive, type CancelDeps } from "./cancel-not-active";
import { CancelNotices } from "./cancel-notices";
import { RecentPresses } from "./repeated-presses";
/**
 * One object per conversation key: the only place that decides what happens to an event of its conversation. It owns the run
 * session registry (tokens, frozen snapshots), the run queue and the runs' steering queues. Runs execute inside the alarm handler,
 * which the platform keeps alive and retries, guarded by the run's status so a redelivered alarm never runs one twice.
 */
export class ConversationDO extends DurableObject<Env> {
  private readonly sessions = new SessionRegistry();
  /** Runs this instance executes, from the moment they are started: cancel and interrupt reach them through `abort`. */
  private readonly active = new Map<string, { abort: AbortController; done: Promise<void> }>();
  private readonly decisions = new SerialDecisions<DispatchResult>();
  /** Queued runs whose cancellation is being recorded (or whose recalled message a claimed one replaces): the scheduler must not start them meanwhile. */
  private readonly cancelling = new Set<string>();
  private readonly live = new LiveHub(() => configOf(this.env).RUN_STREAM_KEEPALIVE_MS);
  private readonly steering = new SteeringQueue(this.ctx.storage, (runId) => this.live.end(runId, "steered"), (job, revision) => this.decisions.decide(job.runId, () => this.decideUnlessDecided(job, revision)), { inTurn: (work) => this.decisions.inTurn(work), decide: (job, revision) => this.decideUnlessDecided(job, revision), wake: () => this.kick(), pauseMs: () => configOf(this.env).DB_RETRY_PAUSE_MS });
  private readonly runs = new RunTableStore(this.ctx.storage, (job) => (this.presses.ended(job.runId), this.steering.ending(job)));
  private readonly albums = new AlbumGathering(this.runs, () => configOf(this.env), (runId) => !this.isActive(runId) && !this.cancelling.has(runId), (work) => this.decisions.inTurn(work), () => this.kick());
  private readonly welcomes = new WelcomeGathering(this.runs, () => configOf(this.env), (runId) => !this.isActive(runId) && !this.cancelling.has(runId), async (job, decision) => void (await this.withoutOwnRun(job, decision)));
  private readonly replies = new PendingReplies(this.ctx.storage);
  /** Runs' ends whose write got no answer: the one found to have ended a run gets its log line then (unanswered-ends.ts). */
  private readonly unanswered = new UnansweredEnds();
  private readonly unhanded = new UnhandedRuns(this.ctx.storage, this.live, (job) => this.cancelNotices.send(job), this.unanswered);
  private readonly unhandedEdits = new UnhandedEdits(this.ctx.storage);
  private scheduling = false;
  private readonly changes = new ChangeSignal();
  private readonly isActive = (runId: string) => this.active.has(runId);
  /** Active runs whose runner's stream is over (its terminal result read, or it broke): they can only end now. */
  private readonly finishing = new Set<string>();
  /** A run that can still pull what is claimed for it: executed here, its runner still streaming, and not aborted (cancelled, interrupted, past its deadline). */
  private readonly canPull = (runId: string) => this.active.get(runId)?.abort.signal.aborted === false && !this.finishing.has(runId);
  /** Whether a run can pull claimed messages: from its frozen snapshot once started; before, only if its agent's runner (as `now`, a newer job, has it) still steers. */
  private readonly steers = (run: StoredRun, now: RunJob) => this.sessions.get(run.job.runId)?.snapshot.availableApis.steering_pull ?? (willSteer(run) && now.runner.capabilities.steering === true);
  private readonly arrivalKeys = new ArrivalKeys();
  private readonly presses = new RecentPresses(this.ctx.storage);
  private readonly claims = new RunClaims();
  private readonly settling = new SettlingWork(() => this.kick());
  private readonly deliveryDeps = chatReplyDeps(this.env, this.replies);
  /** A placeholder still shown for a run cancelled before it started (Discord's "thinking…") is resolved (cancel-notices.ts). */
  private readonly cancelNotices = new CancelNotices(this.deliveryDeps, this.replies, (settled) => this.settling.add(settled), () => configOf(this.env).DELIVERY_SETTLE_TIMEOUT_MS);
  /** Runs that could not record how they ended (their replies, how far followers were told): ended as lost, their own reply hears of it. */
  private readonly unrecordedReplies = new Map<string, UnrecordedRun>();
  /** A lost run ended once at a time: a cancel and the watchdog finding it together share one end (one notice). */
  private readonly interruptDeps: InterruptDeps = { runs: this.runs, active: this.active, cancelQueued: (key, job, why) => this.cancelQueued(key, job, why), moot: (runId) => this.steering.moot(runId) };
  /** What a recall or an edit of a chat message may change here (waiting-revisions.ts). */
  private readonly revisionDeps: Omit<RevisionDeps, "db"> = { runs: this.runs, steering: this.steering, active: this.isActive, held: this.cancelling, kick: () => this.kick(), voidEarlyClaim: (runId) => this.claims.withdraw(runId), cancelQueued: (key, job, why) => this.cancelQueued(key, job, why), endUnhanded: (id, outcome) => this.unhanded.end(dbOf(this.env), id, outcome), editUnhanded: (id, edit) => this.unhandedEdits.hold(id, edit) };
  private readonly finishLost = sharedByKey((_key: string, job: RunJob) => job.runId, (key: string, job: RunJob) => this.endLost(key, job));
  /** What a run's execution reaches here (run-one.ts). */
  private readonly runDeps: RunOneDeps = { env: this.env, sessions: this.sessions, live: this.live, runs: this.runs, steering: this.steering, claims: this.claims, settling: this.settling, replies: this.replies, cancelNotices: this.cancelNotices, finishing: this.finishing, unrecordedReplies: this.unrecordedReplies, unanswered: this.unanswered, revisionDeps: this.revisionDeps, inTurn: (work) => this.decisions.inTurn(work), finishLost: (key, job) => this.finishLost(key, job), deliveryDeps: () => this.deliveryDeps(), armWatchdog: (options) => this.armWatchdog(options), dropUnpulled: (run) => this.dropUnpulled(run) };

  /** Decide what an event bound to an agent does in this conversation (PROTOCOL §10): start, wait, join an active run's steering queue or its album's run, or be rejected. Idempotent by run id. One at a time: an interrupt must see the runs decided before it to supersede them; a redelivery of a run being decided shares that decision. A run ended before this hand-over came (cancelled while ingress was on its way) stays ended: it was dropped while queued, and its event joins nothing. */
  async dispatch(job: RunJob): Promise<DispatchResult> {
    return this.welcomes.answered(job.runId, this.decisions.decide(job.runId, async () => (await this.unhanded.lateHandOver(job)) ?? this.unhandedEdits.applied(job, (edited, version) => this.decide(edited, version))));
  }

  /** A redelivered event whose run ingress read as not started: decided only if no decision was taken for it since (redelivery.ts); so is one whose claim the alarm took back from a dead instance, with its words' edit version. */
  async redeliver(job: RunJob): Promise<DispatchResult> {
    return this.welcomes.answered(job.runId, this.decisions.decide(job.runId, () => this.decideUnlessDecided(job)));
  }
  /** In a decision's turn; also how a message a run claimed and dropped unpulled is decided anew (dropped-claims.ts). */
  private readonly decideUnlessDecided = async (job: RunJob, revision?: number): Promise<DispatchResult> => (await decidedAlready(dbOf(this.env), this.steering, this.runs, job.runId)) ?? this.unhandedEdits.applied(job, (edited, version) => this.decide(edited, version), revision);

  /** Ingress: an album's item is on its way, `files` downloading, or (null) its ingress ended, whatever became of it; its album's run waits for it meanwhile (album-gathering.ts). */
  albumItem(eventId: string, coming: { albumId: string; files: number } | null): Promise<void> {
    return coming ? this.albums.announce(coming.albumId, eventId, coming.files) : this.albums.withdraw(eventId);
  }

  /** `revision`: the version of the edit `job`'s words are (none: as sent), kept with them so an older edit arriving late changes nothing. A press's first run is under way if executed here or waiting (one `running` but not executed here was lost with an earlier instance). */
  private async decide(job: RunJob, revision?: number): Promise<DispatchResult> {
    const repeated = await this.presses.repeatOf(job, Date.now(), async (runId) => this.isActive(runId) || (await this.runs.find(runId))?.[1].state === "queued");
    return repeated ? this.withoutOwnRun(job, { disposition: "rejected", runId: null, metadata: { rejection: repeated } }) : this.presses.noted(job, Date.now(), await this.decideAnew(job, revision));
  }

  private async decideAnew(job: RunJob, revision?: number): Promise<DispatchResult> {
    let table = await this.runs.entries();
    const [now, lastKey] = [Date.now(), table.at(-1)?.[0]];
    const known = table.find(([, r]) => r.job.runId === job.runId);
    if (known) return { disposition: this.isActive(job.runId) ? "started" : (known[1].answered ?? (startable(table, Infinity, this.isActive).some(([k]) => k === known[0]) ? "started" : "queued")), runId: job.runId }; // as first answered
    const merged = this.albums.join(table, job, now);
    if (merged) return this.withoutOwnRun(job, merged);
    const welcomed = this.welcomes.join(table, job, now);
    if (welcomed) return welcomed;
    const strategy = arrivalStrategy(job);
    const waiting = (waitLimit?: number) => this.albums.timed(this.welcomes.head(waitingRun(job, strategy, now, configOf(this.env).ALBUM_WAIT_MS, waitLimit), now), now);
    let stored = waiting();
    if (table.length > 0) {
      if (strategy === "steer" && job.event.event_type === "message.received") {
        const target = steeringTarget(table, job.agent, { running: this.canPull, excluded: (runId) => this.cancelling.has(runId), steers: (run) => this.steers(run, job), executing: this.isActive, answers: repliesWhereMessage(job) });
        if (target && (await this.steering.size(target.job.runId)) < STEERING_QUEUE_CAP) return this.claim(job, this.sessions.get(target.job.runId)?.job ?? { ...target.job, runner: job.runner }, now, revision);
      }
      // Parallel runs take no turn: only a run that does makes the conversation busy.
      const rejection = rejectionOf(table, withoutLost(table, this.isActive), stored, strategy);
      if (rejection) return this.withoutOwnRun(job, { disposition: "rejected", runId: null, metadata: { rejection } });
      if (strategy === "interrupt") ({ table, stored } = await interrupt(this.interruptDeps, table, job, waiting));
    }
    const key = this.arrivalKeys.next(job.runId, now, lastKey);
    const startsNow = startable([...withoutLost(table, this.isActive), [key, stored]], Infinity, this.isActive).some(([k]) => k === key);
    void this.runs.put(key, { ...stored, answered: startsNow ? "started" : "queued", ...(revision === undefined ? {} : { revision }) }); // not awaited: the output gate holds the reply until the write is durable
    this.kick();
    if (table.length === 0 && this.active.size === 0 && stored.notBefore <= now && !this.scheduling) this.claims.prepare(dbOf(this.env), job); // starts with the alarm just set: claimed meanwhile (never while an interrupted run is still ending: its last writes come first)
    return { disposition: startsNow ? "started" : "queued", runId: job.runId };
  }

  override async alarm(): Promise<void> {
    // A delivery while this instance schedules finds the work already taken; keep the watchdog armed.
    if (this.scheduling) return this.armWatchdog();
    this.scheduling = true;
    const startedAt = Date.now();
    const config = configOf(this.env);
    try {
      for (;;) {
        this.changes.seen();
        for (const settled of await this.replies.recover(this.deliveryDeps())) this.settling.add(settled);
        const dropsWaiting = (await this.steering.retryDrops(dbOf(this.env))) || !this.replies.recoveredAll;
        await endLostRuns(this.runs, this.isActive, this.finishLost, config.DB_RETRY_PAUSE_MS);
        const table = await this.runs.entries();
        const now = Date.now();
        // A run started now must end, and its reply settle (after the replies before it), within this invocation's wall time.
        const outOfBudget = Math.max(now + config.RUN_DEADLINE_MS, this.deliveryDeps().order.busyUntil()) + config.DELIVERY_SETTLE_TIMEOUT_MS - startedAt > ALARM_BUDGET_MS;
        if (!outOfBudget) for (const [key, run] of startable(table, now, this.isActive)) if (!this.cancelling.has(run.job.runId)) this.start(key, run);
        // A cancellation being recorded is work too: its end wakes the scheduler, so it waits rather than re-arm at once.
        if (this.active.size === 0 && this.settling.size === 0 && this.cancelling.size === 0) {
          // Only debounced runs wait, or the next run might outlive this invocation: continue in a fresh one.
          const wakeAt = idleWakeAt(table, now, outOfBudget, dropsWaiting ? now + config.DB_RETRY_PAUSE_MS : null);
          await (wakeAt === null ? this.ctx.storage.deleteAlarm() : this.ctx.storage.setAlarm(wakeAt));
          // A dispatch or a cancel that came in meanwhile only signalled this (still running) scheduler: look again.
          if (!this.changes.changed) return;
          continue;
        }
        await this.armWatchdog();
        // Drops waiting are tried again after the pause, not only at the next change: a busy run may keep this loop here for minutes, and an alarm meanwhile leaves at once.
        await this.changes.next(nextWakeAt(table, now, dropsWaiting ? now + config.DB_RETRY_PAUSE_MS : undefined));
      }
    } finally {
      this.scheduling = false;
    }
  }

  /** A run's Host API call; the token is checked here, against the hash of the live session. */
  async hostApi(runId: string, token: string, body: HostApiBody): Promise<HostApiReply> {
    const session = await this.sessions.authenticated(runId, token);
    if (!session) return this.sessions.refusal(runId, token);
    const limit = configOf(this.env).MAX_API_CALLS_IN_FLIGHT;
    if (session.ledgerSequence.callsInFlight >= limit) return refuseCallsInFlight(session.snapshot, limit);
    const parsed = parseHostApiBody(body);
    if ("refused" in parsed) return refuseBody(session.snapshot, parsed.refused);
    // Tracked: the run's end gives a call stopped with it a moment to record how it ended.
    const answer = await session.ledgerSequence.track(handleHostApiCall(session.actionContext(this.env, this.steering.portFor(dbOf(this.env), session.job), (entries) => this.live.publish(runId, entries)), parsed));
    // Outlived its (recorded) run's end and its drop: what it put back (a pull whose write failed) is dropped now.
    if (!this.sessions.has(runId) && !(await this.runs.find(runId))) await this.dropUnpulled(session.job);
    return answer;
  }

  /** The reader of a stream this object answered with (a model stream, a follower) went away; the Worker saw it, this object cannot. */
  async readerGone(runId: string, streamId: string): Promise<void> {
    this.live.unfollow(runId, streamId);
    await this.sessions.get(runId)?.streams.close(streamId);
  }
  /** The refusal of a token that `hostApi` would refuse now, or null: asked before a large body is read, and before an upload is recorded. */
  async refuseHostApiToken(runId: string, token: string, action: string | null = null): Promise<HostApiReply | null> {
    return (await this.sessions.authenticated(runId, token)) ? null : this.sessions.refusal(runId, token, action);
  }
  /** artifact.upload: the token, snapshot and run's upload budget are checked here; the Worker then streams the body to R2 itself. */
  async authorizeUpload(runId: string, token: string, request: UploadRequest): Promise<UploadAuthorization> {
    const session = await this.sessions.authenticated(runId, token);
    if (!session) return { ok: false, reply: await this.sessions.refusal(runId, token, "artifact.upload") };
    return authorizeUpload(session.uploadContext(this.env, (entries) => this.live.publish(runId, entries)), request, session);
  }
  /** More of its run's upload budget for a chunked body as it arrives (only while its token holds), or what an upload did not store given back. */
  async changeUploadBudget(runId: string, token: string, held: number, change: number): Promise<number | null> {
    return changeUploadBudget(configOf(this.env), change > 0 ? await this.sessions.authenticated(runId, token) : this.sessions.get(runId), held, change);
  }
  /** SSE of a run's results for a new follower, after the frames it has (LiveHub.follow); null for a run this host does not know, "full" for one followed by as many as it may be. */
  async subscribe(runId: string, after = 0): Promise<{ stream: ReadableStream<Uint8Array>; streamId: string } | null | "full"> {
    const follower = await this.live.follow(runId, async () => this.sessions.has(runId) || (await this.runs.find(runId)) !== undefined, runsStore(dbOf(this.env)), after);
    return typeof follower === "string" || !follower ? follower : { stream: follower.readable, streamId: follower.id };
  }

  /** Operator cancel: aborts an active run, or drops a queued one (known here or only in libSQL). A run whose dispatch is still being decided is cancelled as that decision leaves it; one not active in turn with the decisions (a redelivery handing it over is decided wholly before or after); one active (or started meanwhile) is aborted outside. `because`: why, added to its error message (an agent deleted). */
  async cancel(runId: string, because?: string): Promise<CancelOutcome> {
    await this.decisions.settled(runId);
    const abort = () => abortActive(this.active, this.finishing, runId, because);
    return abort() ?? (await this.decisions.inTurn(() => cancelNotActive(this.cancelDeps(), runId, because))) ?? abort() ?? { cancelled: false };
  }
  /** A chat message recalled or edited while it may wait here (waiting-revisions.ts): in turn with the decisions, after its own run's. */
  async revise(change: MessageRevision): Promise<RevisionOutcome> {
    return this.decisions.settled(change.runId).then(() => this.decisions.inTurn(() => reviseWaiting({ ...this.revisionDeps, db: dbOf(this.env) }, change)));
  }

  /** What an operator's cancel of a run not executed here reaches (cancel-not-active.ts). */
  private readonly cancelDeps = (): CancelDeps => ({ db: dbOf(this.env), runs: this.runs, active: this.isActive, steering: this.steering, unhanded: this.unhanded, finishLost: this.finishLost, cancelQueued: (key, job, why) => this.cancelQueued(key, job, why) });

  /** The cron's sweep: of these runs ingress recorded long ago, those never handed over here end as failed (never-handed-over.ts). Answers how many it ended. */
  endNeverHandedOver(runIds: string[]): Promise<number> {
    return endNeverHandedOver({ db: dbOf(this.env), active: this.isActive, runs: this.runs, steering: this.steering, unhanded: this.unhanded, wake: () => this.kick(), inTurn: (work) => this.decisions.inTurn(work) }, runIds);
  }

  /**
   * A run that never started: the terminal write first, so a failure leaves it queued, not half-cancelled. Answers
   * whether this call ended it. Only this instance's own claim (one made ahead of its start) is ended with it: a run
   * claimed by an instance that died before its table said so may have reached its runner, and ends as lost, as its
   * start would end it (README: a cancel of a lost run is not cancelled).
   */
  private async cancelQueued(key: string, job: RunJob, reason: string): Promise<boolean> {
    this.cancelling.add(job.runId);
    const claimedHere = this.claims.claimedHere(job.runId);
    this.claims.withdraw(job.runId);
    let ended: LedgerEntry | null = null;
    try {
      const db = this.deliveryDeps().db;
      ended = await endRunAsHost(db, job, { status: "cancelled", errorCode: "cancelled", errorMessage: reason }, { onlyQueued: !claimedHere, unanswered: this.unanswered });
      if (!ended && !claimedHere && (await runsStore(db).get(job.runId))?.status === "running") {
        await this.finishLost(key, job);
        return false;
      }
      if (ended) {
        this.live.publish(job.runId, [ended]);
        this.cancelNotices.send(job);
      } else await this.cancelNotices.owed(job); // ended by an earlier write of this cancel, applied unanswered
      await this.runs.delete(key);
      this.claims.forget(job.runId); // its end is recorded: no claim to resume
    } finally {
      this.cancelling.delete(job.runId);
      // Cancelled, or (the write failed) startable again: either way the scheduler looks again.
      this.kick();
    }
    await this.dropUnpulled(job);
    this.live.end(job.runId, "cancelled");
    return ended !== null;
  }

  /** Tell the scheduler something changed, starting it if it is not running. */
  private kick(): void {
    this.changes.notify();
    if (!this.scheduling) this.ctx.storage.setAlarm(Date.now());
  }

  /** If this instance dies mid-run, the alarm (a heartbeat while runs are active) finds the orphans and ends them. */
  private armWatchdog(options?: DurableObjectSetAlarmOptions): Promise<void> {
    const deadlines = [...this.sessions.values()].map((s) => s.snapshot.deadlineAt);
    if (!deadlines.length && !this.replies.size) return Promise.resolve();
    return this.ctx.storage.setAlarm(watchdogAt(deadlines, Date.now(), configOf(this.env).RUN_WATCHDOG_INTERVAL_MS), options);
  }

  /** `run` as the scheduler's table had it: an album's item or a join that joined it since (in the microtasks before this call) is in its entry now, and its claim must record that one's decision too (run/claim.ts). */
  private start(key: string, run: StoredRun): void {
    const stored = this.runs.current(key) ?? run;
    const runId = stored.job.runId;
    const abort = new AbortController();
    const done = runOne(this.runDeps, key, stored, abort).finally(() => {
      this.active.delete(runId);
      this.finishing.delete(runId);
      this.kick();
    });
    this.active.set(runId, { abort, done });
  }

  /** Steer: the event joins the target run's queue; its own run is never started. A target still waiting out its debounce waits longer (debounce.ts; first, so it does not start before the claim is written). A target that stopped pulling (ended) while the claim was recorded never had it: the claim is taken back and the event decided anew (README "Steering"); if it cannot be, or the write got no answer (queued all the same), the target's drop records it. */
  private async claim(job: RunJob, target: RunJob, now: number, revision?: number): Promise<DispatchResult> {
    await slideDebounce(this.runs, target.runId, job, now, (runId) => this.isActive(runId) || this.cancelling.has(runId));
    const pulls = () => (this.isActive(target.runId) ? this.canPull(target.runId) : this.runs.holdsNow(target.runId));
    if ((await this.steering.claim(dbOf(this.env), job, target, now, pulls, revision).finally(async () => pulls() || (await this.dropUnpulled(target)))) === "released") return this.decide(job, revision);
    this.live.end(job.runId, "steered"); // its own run is discarded: a follower of it (handed over late) hears so
    return { disposition: "steered", runId: target.runId };
  }

  /** An event decided without a run of its own (rejected, or an album's item or a join joining its first's run): recorded, and followers of its own run told. */
  private async withoutOwnRun(job: RunJob, decision: EventDecision): Promise<DispatchResult> {
    await writeAll(dbOf(this.env), decidedWithoutOwnRun(dbOf(this.env), job.event.event_id, job.runId, decision));
    this.live.end(job.runId, decision.disposition);
    return decidedWithoutRun(decision);
  }

  /** Claimed messages the run never pulled: one `steering.dropped` record each, now or (the database is away) retried by the alarm. */
  private async dropUnpulled(run: RunJob): Promise<void> {
    if (!(await this.steering.drop(dbOf(this.env), run))) this.kick();
  }

  private async endLost(key: string, job: RunJob): Promise<void> {
    const notice = await endLostRun(this.deliveryDeps(), job, this.unrecordedReplies.get(job.runId), (entries) => this.live.publish(job.runId, entries), this.unanswered);
    this.unrecordedReplies.delete(job.runId);
    this.claims.forget(job.runId); // its end is recorded: no claim to resume; its notice is tracked as any recorded run's reply (a restart leaves it to the next instance)
    if (notice) this.settling.add(this.replies.track(job, notice.settle(configOf(this.env).DELIVERY_SETTLE_TIMEOUT_MS)));
    await this.runs.delete(key);
    await this.dropUnpulled(job);
    this.live.end(job.runId, (await runsStore(dbOf(this.env)).get(job.runId).catch(() => undefined))?.status ?? "failed");
  }
}
