import { debounceLimitMs, type ConcurrencyStrategy } from "../src/agents/policy";
import { asks, sameAudience, type RunJob } from "../src/run/job";
import { jsonByteLength } from "../src/protocol/common";
import { albumIdOf, asAlbumHead } from "./albums";
import { sentBefore } from "./sent-order";

/**
 * When a stored run may start, relative to the other runs of its conversation:
 * - `after-all`: every run stored before it has ended (enqueue, arrival order);
 * - `after-running`: no run is running (interrupt: the active runs were cancelled);
 * - `now`: at once (parallel).
 * Parallel runs take no turn: they neither wait for the others nor are waited for.
 */
export type StartRule = "after-all" | "after-running" | "now";

/** How each strategy's run starts: only an interrupting run overtakes the waiting ones, only a parallel one the running ones. */
export const START_RULE: Record<ConcurrencyStrategy, StartRule> = {
  steer: "after-all",
  enqueue: "after-all",
  reject: "after-all",
  interrupt: "after-running",
  parallel: "now",
};

/** `runId`: the run that handles the event (its own, the one that claimed it or whose album it joined; null when rejected); `duplicate`: a redelivery of an event already decided; `rejection`: why one was rejected (a chat's acknowledgement says so). */
export interface DispatchResult {
  disposition: "started" | "queued" | "steered" | "merged" | "rejected" | "duplicate" | "unaddressed";
  runId: string | null;
  rejection?: Rejection["reason"];
}

/** An operator's cancel: `cancelled` when its end is recorded already (it had not started), `cancelling` for an active run being aborted. */
export type CancelOutcome = { cancelled: false } | { cancelled: true; status: "cancelled" | "cancelling" };
/** A cancel of a run that had not started: ended by this call, or not (another cancel, its start, ended it first). */
export const endedAtOnce = (ended: boolean): CancelOutcome => (ended ? { cancelled: true, status: "cancelled" } : { cancelled: false });

/** A decision that leaves an event without a run of its own (recorded on its EventLog row). */
export interface EventDecision {
  disposition: "rejected" | "merged" | "unaddressed";
  runId: string | null;
  metadata?: { rejection?: Rejection } & Record<string, unknown>;
}

/** What an event decided without a run of its own is answered. */
export const decidedWithoutRun = (d: EventDecision): DispatchResult => ({ disposition: d.disposition, runId: d.runId, ...(d.metadata?.rejection ? { rejection: d.metadata.rejection.reason } : {}) });

export interface StoredRun {
  job: RunJob;
  state: "queued" | "running";
  start: StartRule;
  /** Debounce: not before this time (ms since the epoch). */
  notBefore: number;
  /** Debounce: the latest a burst's messages may push `notBefore` back to (absent without debounce, and in runs stored by earlier releases). */
  waitLimit?: number;
  /** The job's size as JSON (absent in runs stored by earlier releases). */
  bytes?: number;
  /** What its event was answered (absent in runs stored by earlier releases): an interrupt supersedes a run answered `started`, debounced or not. */
  answered?: "started" | "queued";
  /** The version of the newest edit of its message applied while it waited (waiting-revisions.ts). */
  revision?: number;
}

/**
 * A conversation holds at most this many runs waiting to begin, and this many bytes of their jobs (an API event
 * carries up to MAX_EVENT_BODY_BYTES): its object keeps them in memory, which a Worker isolate has 128 MB of. An event
 * beyond is rejected, whatever the strategy.
 */
export const WAITING_RUNS_CAP = 100;
export const WAITING_RUNS_MAX_BYTES = 32 * 1024 * 1024;

/**
 * A new run as it waits in the table: its start rule and debounce from its agent; an album's first item waits `albumWaitMs` for the others.
 * `waitLimit`: the limit of a burst it continues (the waiting run of its agent it supersedes), rather than its own.
 */
export function waitingRun(job: RunJob, strategy: ConcurrencyStrategy, now: number, albumWaitMs = 0, waitLimit?: number): StoredRun {
  const quiet = job.agent.concurrency.debounce_ms ?? 0;
  const limit = quiet > 0 ? (waitLimit ?? now + debounceLimitMs(job.agent.concurrency)) : undefined;
  const notBefore = limit === undefined ? now : Math.max(now, Math.min(now + quiet, limit));
  return asAlbumHead({ job, state: "queued", start: START_RULE[strategy], notBefore, ...(limit === undefined ? {} : { waitLimit: limit }), bytes: jsonByteLength(job) }, albumWaitMs, now);
}

/** Why an event was rejected, kept on its EventLog row as `metadata.rejection`: the two causes call for different fixes. */
export type Rejection =
  | { reason: "concurrency_strategy"; strategy: "reject"; busy_run_id: string }
  | { reason: "waiting_room_full"; waiting_runs: number; waiting_bytes: number; event_bytes: number; max_runs: number; max_bytes: number }
  | { reason: "newer_message"; strategy: "interrupt"; newer_run_id: string }
  /** The same button pressed again moments after (./repeated-presses.ts): the first press's answer is under way. */
  | { reason: "repeated_press"; first_event_id: string; first_run_id: string };

/**
 * Whether `run` is rejected, and why: its agent's `reject` strategy while a run that takes turns is active or waiting
 * (in `live`, the table without the runs lost with an earlier instance); under `interrupt`, a message the user sent
 * before one whose run of its agent is already here (it reached its conversation late, its files slow to download):
 * the newer question makes it moot, as it would have had it come first; or, whatever the strategy, the waiting room
 * full (`run` would take the waiting runs past WAITING_RUNS_CAP or WAITING_RUNS_MAX_BYTES).
 */
export function rejectionOf(table: RunTable, live: RunTable, run: StoredRun, strategy: ConcurrencyStrategy): Rejection | null {
  const busy = strategy === "reject" ? live.find(([, r]) => takesTurns(r)) : undefined;
  if (busy) return { reason: "concurrency_strategy", strategy: "reject", busy_run_id: busy[1].job.runId };
  const newer = strategy === "interrupt" && asks(run.job) ? live.find(([, r]) => sameQuestionLine(r, run.job) && sentBefore(run.job, r.job)) : undefined;
  if (newer) return { reason: "newer_message", strategy: "interrupt", newer_run_id: newer[1].job.runId };
  const waiting = table.filter(([, r]) => r.state === "queued");
  const [bytes, eventBytes] = [waiting.reduce((sum, [, r]) => sum + (r.bytes ?? 0), 0), run.bytes ?? 0];
  if (waiting.length < WAITING_RUNS_CAP && bytes + eventBytes <= WAITING_RUNS_MAX_BYTES) return null;
  return { reason: "waiting_room_full", waiting_runs: waiting.length, waiting_bytes: bytes, event_bytes: eventBytes, max_runs: WAITING_RUNS_CAP, max_bytes: WAITING_RUNS_MAX_BYTES };
}

/** Stored runs in arrival order (their storage keys sort by arrival). */
export type RunTable = ReadonlyArray<readonly [key: string, run: StoredRun]>;

/**
 * Keys sort by arrival at the conversation, the order its decisions (and
 * the dispositions answered) were taken in, not by when ingress began: an
 * event slow to record (its files fetched first) must not overtake one
 * already answered `started`. The counter orders arrivals within a
 * millisecond.
 */
export class ArrivalKeys {
  private arrivals = 0;
  private lastAt = 0;

  /**
   * The key of a run arriving now, after `lastKey` (the last one stored, by this instance or an earlier one);
   * decisions are taken one at a time, so calls come in arrival order.
   */
  next(runId: string, now: number, lastKey?: string): string {
    // Never earlier than the last one, should the clock step back (or another instance's clock be ahead).
    this.lastAt = Math.max(now, this.lastAt);
    let key = this.keyOf(runId);
    if (lastKey !== undefined && key <= lastKey) {
      this.lastAt = Number(lastKey.slice(4, 19)) + 1;
      key = this.keyOf(runId);
    }
    return key;
  }

  private keyOf(runId: string): string {
    return `run:${String(this.lastAt).padStart(15, "0")}:${String(this.arrivals++).padStart(9, "0")}:${runId}`;
  }
}

/**
 * When an idle scheduler should wake next (null: no alarm): at once for runs
 * it could not start in this invocation, else at the first debounce's end or
 * the next retry of drops waiting to be recorded.
 */
export function idleWakeAt(table: RunTable, now: number, outOfBudget: boolean, retryAt: number | null): number | null {
  const debounced = table.map(([, r]) => r.notBefore).filter((t) => t > now);
  if (table.length > 0 && (outOfBudget || !debounced.length)) return now;
  const wakes = retryAt === null ? debounced : [...debounced, retryAt];
  return wakes.length ? Math.min(...wakes) : null;
}

const canSteer = (job: RunJob) => job.runner.capabilities.steering === true;

/**
 * The runs that may start now, in arrival order. `running` says which runs
 * this instance executes. One pass in arrival order, where each run chosen
 * counts as running for the ones after it, so two runs that must take turns
 * never start together. An interrupting run waiting overtakes the runs
 * waiting their turn, whenever they arrived: it is next once nothing runs,
 * but after a run answered "started" before it came (another agent's, or a
 * notification: what it supersedes was cancelled), and after an interrupting
 * run waiting before it that it did not supersede (another agent's, or one of
 * a message sent after it), which it does not overtake. Debounce
 * windows never reorder: decide answers as if every window were over.
 */
export function startable(table: RunTable, now: number, running: (runId: string) => boolean): [string, StoredRun][] {
  const out: [string, StoredRun][] = [];
  let anyRunning = table.some(([, r]) => takesTurns(r) && running(r.job.runId));
  const interrupting = table.some(([, r]) => r.start === "after-running" && isQueued(r, running));
  let turnsBefore = 0;
  let aheadBefore = false;
  for (const [key, run] of table) {
    const promised = run.start === "after-all" && run.answered === "started" && isQueued(run, running);
    const ready = isQueued(run, running) && run.notBefore <= now && mayStart(run, anyRunning, interrupting && !promised ? Infinity : turnsBefore, aheadBefore);
    if (takesTurns(run)) turnsBefore++;
    // An older interrupting run still waiting is another agent's, or of a message sent after this one (the agent's others were superseded): still in its window, it stays ahead.
    if (promised || (run.start === "after-running" && isQueued(run, running))) aheadBefore = true;
    if (!ready) continue;
    out.push([key, run]);
    if (takesTurns(run)) anyRunning = true;
  }
  return out;
}

/**
 * Whether an interrupting event of `job`'s agent supersedes `run`: a run of the same agent (as created) answering
 * something asked (a message, an API invocation) that takes turns. Another agent's run is that agent's (its own
 * strategy decides for it), a notification's (a welcome) is not made moot by a newer message, and parallel runs take no
 * turn. Nor is the run of a message the user sent after `job`'s (by the platform's order: sent-order.ts), which reached
 * the conversation first (`job`'s files slow to download): `job` is no newer question than it. Nor, for the same
 * reason, a run of the album `job` is an item of: the album is one message, and an item too late to join its run (a
 * slow upload) is part of what that run answers.
 */
export const supersedes = (job: RunJob) => (run: StoredRun) => sameQuestionLine(run, job) && !sentBefore(job, run.job);

/**
 * A run answering something asked of `job`'s agent that takes turns, for the same eyes, other than `job`'s own album:
 * what an interrupt weighs `job` against. A question only one user sees (a Discord ephemeral press) and one the chat
 * sees are never each other's newer question: neither answer is made moot by the other (platforms/audience.ts).
 */
const sameQuestionLine = (run: StoredRun, job: RunJob) => takesTurns(run) && sameAgent(run.job, job.agent) && asks(run.job) && sameAudience(run.job, job) && !sameAlbum(run.job, job);

/**
 * What an interrupting event of `job`'s agent supersedes besides its active runs (which are aborted): of the runs it
 * `supersedes`, those answered "started" but not executing yet (still in their debounce window, or due now with their
 * alarm still to come), and older interrupting runs still waiting. A run answered "queued" whose turn came meanwhile is
 * superseded only once it is due: in its debounce window it still waits its turn.
 */
export function supersededByInterrupt(table: RunTable, job: RunJob, now: number, running: (runId: string) => boolean): RunTable {
  const due = new Set(startable(table, now, running).map(([key]) => key));
  return table.filter(([key, run]) => isQueued(run, running) && supersedes(job)(run) && (run.start === "after-running" || due.has(key) || run.answered === "started"));
}

/**
 * The runs but those lost with an earlier instance (stored as running, not executed by this one): neither active nor
 * waiting, a run of a `reject` agent is not refused for them, nor answered `queued` (the scheduler ends them first).
 */
export const withoutLost = (table: RunTable, running: (runId: string) => boolean): RunTable => table.filter(([, r]) => r.state !== "running" || running(r.job.runId));

const takesTurns = (run: StoredRun) => run.start !== "now";
/** Items of one album, by their events (also with albums not gathered: ALBUM_WAIT_MS 0). */
const sameAlbum = (a: RunJob, b: RunJob) => albumIdOf(a) !== null && albumIdOf(a) === albumIdOf(b);
const isQueued = (run: StoredRun, running: (runId: string) => boolean) => run.state === "queued" && !running(run.job.runId);
/** Whether a queued run's turn has come: `turnsBefore` runs that take turns come before it, `anyRunning` says whether one of them runs, `aheadBefore` whether one an interrupting run does not overtake waits before it. */
const mayStart = (run: StoredRun, anyRunning: boolean, turnsBefore: number, aheadBefore: boolean) =>
  !takesTurns(run) || (!anyRunning && (run.start === "after-running" ? !aheadBefore : turnsBefore === 0));

/** The agent as created: one deleted and created anew under its id (a new state epoch) is another agent. Jobs stored before epochs existed match any. */
export const sameAgent = (job: RunJob, agent: Pick<RunJob["agent"], "agentId" | "stateEpoch">) =>
  job.agent.agentId === agent.agentId && (agent.stateEpoch === undefined || job.agent.stateEpoch === undefined || (job.agent.stateEpoch ?? null) === (agent.stateEpoch ?? null));

/**
 * The run a new message is claimed by (PROTOCOL §10): the oldest active run
 * of the same agent, if it can pull: `steers` answers for a run, from its
 * frozen snapshot once it has started. Another agent's run never receives the
 * message: one event, one binding. `running` says which runs can still pull;
 * `excluded` ones (being cancelled) are not active any more.
 *
 * A run of the agent that has not begun counts too, and comes first (the
 * newest of them): one in its debounce window (even while it also waits for
 * another agent's run: the burst is still one), one answered `started` whose
 * alarm is still to come, one waiting its turn (a message that queued in a run
 * of its own, the steering queue full, say). Otherwise the next message,
 * claimed by the run before it, would be handled ahead of it. `executing` says
 * which runs this instance executes (without it, `running`). Only runs that
 * `answers` (default: all) are candidates: see `repliesWhereMessage`.
 */
export function steeringTarget(
  table: RunTable,
  agent: string | Pick<RunJob["agent"], "agentId" | "stateEpoch">,
  runs: { running: (runId: string) => boolean; excluded: (runId: string) => boolean; steers: (run: StoredRun) => boolean; executing?: (runId: string) => boolean; answers?: (run: StoredRun) => boolean },
): StoredRun | undefined {
  const named = typeof agent === "string" ? { agentId: agent, stateEpoch: undefined } : agent;
  // Another agent's runs (one deleted and created anew under its id too) never take this message.
  const ofAgent = (r: StoredRun) => sameAgent(r.job, named) && !runs.excluded(r.job.runId) && (runs.answers?.(r) ?? true);
  // Waiting: not begun here yet (a run executing that cannot pull, being stopped, is not waiting).
  const waiting = table.findLast(([, r]) => ofAgent(r) && isQueued(r, runs.executing ?? runs.running));
  const active = waiting ?? table.find(([, r]) => ofAgent(r) && runs.running(r.job.runId));
  return active && runs.steers(active[1]) ? active[1] : undefined;
}

/**
 * Whether `run`'s reply reaches where `message`'s answer must go: a chat message's to its chat, so only a run with a
 * reply target there (never a recall's, which has none, nor an API event's) may pull it; an API message's caller
 * follows the claiming run's stream, whatever run it is. And only the same eyes: a message one user alone sees (a
 * Discord ephemeral press) is never pulled by a run whose answer others see, nor a message of the chat's (whose
 * sender would never see the answer) by a run answering one user alone (platforms/audience.ts).
 */
export const repliesWhereMessage = (message: RunJob) => (run: StoredRun) => (!message.delivery || run.job.delivery !== undefined) && sameAudience(run.job, message);

/** Whether a run not started yet will steer, as its job stands now (an edit to its agent before it starts may change that). */
export const willSteer = (run: StoredRun) => canSteer(run.job);


/**
 * The next time a stored run waits for (undefined when none does): a queued
 * run's debounce, or the pause before a lost run is ended again; or, if
 * sooner, `retryAt` (the next retry of drops waiting to be recorded).
 */
export function nextWakeAt(table: RunTable, now: number, retryAt?: number): number | undefined {
  const waiting = table.filter(([, r]) => r.notBefore > now).map(([, r]) => r.notBefore);
  if (retryAt !== undefined) waiting.push(retryAt);
  return waiting.length ? Math.min(...waiting) : undefined;
}
