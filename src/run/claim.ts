import { batchAll, type Db } from "../db/client";
import type { StateScope } from "../protocol/context";
import { RUN_FAILURE_CODES } from "../protocol/errors";
import { descriptorsFrom, resourceDescriptorQueries, type ResourceDescriptors } from "../resources/grants";
import { RunnerCallError } from "../runner/errors";
import { currentAgentStatement, type CurrentAgent } from "../stores/binding-resolution";
import { decidedWithoutOwnRun } from "../stores/event-log";
import { isNotStarted, runsStore } from "../stores/runs";
import { recalledRunStatement } from "../stores/recalled-message";
import { SEEDED_CONVERSATION_ID_KEY, stateStore } from "../stores/state";
import type { StateRead } from "./context";
import { historyBeforeOf, historyBeforeStatement, type HistoryBefore } from "./history-before";
import { mergedDecision, type RunJob } from "./job";
import { jobAgentOf, jobRunnerOf } from "./job-parts";
import { stateScopesOf, type StateScopeKeys } from "./snapshot";
import { welcomeDecisions } from "./welcome-decisions";

/** A run's start found the message it answers recalled: it did not start. */
export const RECALLED = "recalled" as const;

/** Where the runner is called, as read when the run was claimed; its secret as stored (opened only to sign). */
export interface RunnerEndpoint {
  baseUrl: string;
  secret: string | null;
}

export interface ClaimedRun {
  /** The job with the agent and runner as they are now. */
  job: RunJob;
  stateScopes: StateScopeKeys;
  state: StateRead;
  descriptors: ResourceDescriptors;
  historyBefore: HistoryBefore;
  /** The endpoint, or why the run cannot call its runner (the agent was deleted or disabled, the runner removed). */
  runner: RunnerEndpoint | RunnerCallError;
}

/**
 * queued → running, in one round trip with everything the run reads before it starts: the agent,
 * runner and service as they are now, whether it has history it may read before its event
 * (history-before.ts), the §9 seed of `external.conversation_id`, the state snapshot
 * of the run's enabled scopes (only those) and the descriptors of the resources the agent grants.
 * An agent edited while the run was queued takes effect here: when the edit changed the state scopes
 * or the grants, they are read again in a second round trip. Null when another trigger already took
 * the run; `RECALLED` (the run left as it was) when `unlessRecalled` and the message it answers was recalled.
 */
async function claimRun(db: Db, queued: RunJob, stamp: number, resumeAt: number | null, unlessRecalled: boolean): Promise<ClaimedRun | null | typeof RECALLED> {
  const stateScopes = await stateScopesOf(queued);
  const inputs = runInputs(db, queued, stateScopes);
  const merged = [...albumDecisions(db, queued), ...welcomeDecisions(db, queued)];
  const message = unlessRecalled ? queued.event.event_id : null;
  const results = await batchAll(db, [...merged, recalledRunStatement(db, queued.runId, message), runsStore(db).markRunningStatement(queued.runId, stamp, resumeAt, queued.agent.stateEpoch, message), currentAgentStatement(db, queued.agent.agentId), historyBeforeStatement(db, queued), ...inputs.statements]);
  const [recalledRows, marked, currentRows, historyRows, ...rest] = results.slice(merged.length);
  // Not started (nor started by this instance's own earlier claim, unanswered): another instance's start is not undone.
  const [recalled] = recalledRows as { status: string; startedAt: number | null }[];
  if (recalled && (isNotStarted(recalled.status) || (recalled.status === "running" && recalled.startedAt === resumeAt))) return RECALLED;
  if ((marked as unknown[]).length !== 1) return null;
  const current = (currentRows as CurrentAgent[])[0];
  const historyBefore = historyBeforeOf(queued, historyRows);
  const unavailable = refusalOf(current, queued);
  if (unavailable) return { job: queued, stateScopes, historyBefore, ...inputs.read(rest), runner: unavailable };
  // refusalOf vouched for the agent, its runner and its service.
  const { agent, runner, service } = current as { agent: NonNullable<CurrentAgent["agent"]>; runner: NonNullable<CurrentAgent["runner"]>; service: NonNullable<CurrentAgent["service"]> };
  const job: RunJob = { ...queued, agent: jobAgentOf(agent), runner: jobRunnerOf(runner, service) };
  const endpoint = { baseUrl: service.baseUrl, secret: service.secret };
  // The scope keys are derived from the state policy, the runner and the agent as created (its state epoch): recomputed
  // only when one of them changed.
  const sameKeys = sameJson(job.agent.statePolicy, queued.agent.statePolicy) && job.runner.runnerId === queued.runner.runnerId && job.agent.stateEpoch === queued.agent.stateEpoch;
  const scopesNow = sameKeys ? stateScopes : await stateScopesOf(job);
  if (sameJson(scopesNow, stateScopes) && sameJson(job.agent.resourcePolicy, queued.agent.resourcePolicy)) {
    return { job, stateScopes, historyBefore, ...inputs.read(rest), runner: endpoint };
  }
  const again = runInputs(db, job, scopesNow);
  return { job, stateScopes: scopesNow, historyBefore, ...again.read(again.statements.length ? await batchAll(db, again.statements) : []), runner: endpoint };
}

/**
 * The `merged` decisions of the album items that joined the run, written (again: idempotent) as it starts. An item
 * whose own decision write failed is sent again by its platform, maybe after this run ended and its conversation
 * forgot the album: its event then already says `merged`, and it never runs a second time.
 */
function albumDecisions(db: Db, job: RunJob): unknown[] {
  const album = job.album;
  if (!album) return [];
  return album.parts.filter((p) => p.runId !== job.runId).flatMap((p) => decidedWithoutOwnRun(db, p.eventId, p.runId, mergedDecision(album.mediaGroupId, job.runId)));
}

/**
 * The claims one Durable Object instance makes, each stamped with the `started_at` it writes. A claim whose write went
 * unanswered may have applied: the retry takes the run back when it is running under this instance's own stamp. Never
 * another instance's: a run an instance that is gone started may have reached its runner, and must never run twice.
 */
export class RunClaims {
  private readonly stamps = new Map<string, number>();
  /** Claims made ahead of the run's start (`prepare`), for its start to take. */
  private readonly early = new Map<string, Promise<ClaimedRun | null | typeof RECALLED>>();

  /** claimRun, resuming this instance's earlier claim of the run if it had one; the claim `prepare` made, if there is one. */
  take(db: Db, queued: RunJob, unlessRecalled = true): Promise<ClaimedRun | null | typeof RECALLED> {
    const early = this.early.get(queued.runId);
    this.early.delete(queued.runId);
    if (early) return early;
    const resumeAt = this.stamps.get(queued.runId) ?? null;
    const stamp = resumeAt ?? Date.now();
    this.stamps.set(queued.runId, stamp);
    return claimRun(db, queued, stamp, resumeAt, unlessRecalled);
  }

  /**
   * Claims a run about to start while the object's alarm is on its way (a fresh alarm, due now), so the round trip
   * overlaps that hop. Safe before the run's table entry is durable: the output gate holds the claim's request until it
   * is. An early claim not taken (the run was cancelled meanwhile) leaves the run `running` for the cancel's end write,
   * which ends running runs too; lost with the instance in that moment, the next one finds it running under another
   * stamp and ends it as lost (as it would a run claimed by the alarm, lost before its runner call).
   */
  prepare(db: Db, queued: RunJob): void {
    const claim = this.take(db, queued);
    // Awaited by the run's start; a failure is its start's to handle (or nobody's, once cancelled).
    claim.catch(() => {});
    this.early.set(queued.runId, claim);
  }

  /**
   * A cancel is ending the run: a claim made ahead of its start is void. Should the cancel fail (its write unanswered,
   * maybe applied), the start claims again, resuming by its stamp: a run the cancel ended is then not run.
   */
  withdraw(runId: string): void {
    this.early.delete(runId);
  }

  /** Whether this instance claimed the run (or has its claim on the wire): a run found `running` otherwise was claimed by an instance that is gone. */
  claimedHere(runId: string): boolean {
    return this.stamps.has(runId);
  }

  /** The run's end is recorded (or it was never this instance's to run): nothing to resume. */
  forget(runId: string): void {
    this.stamps.delete(runId);
    this.early.delete(runId);
  }
}

/** Why a run of `queued` cannot call its runner now (its agent deleted, recreated, disabled; its runner removed), or null. */
export function refusalOf(current: CurrentAgent | undefined, queued: RunJob): RunnerCallError | null {
  if (!current) return new RunnerCallError(RUN_FAILURE_CODES.agentUnavailable, "the run's agent was deleted before the run started");
  // Another agent created under the same id since (a new state epoch) is not the agent that bound the event: it was deleted.
  if (queued.agent.stateEpoch !== undefined && (queued.agent.stateEpoch ?? null) !== (current.agent.stateEpoch ?? null)) {
    return new RunnerCallError(RUN_FAILURE_CODES.agentUnavailable, "the run's agent was deleted before the run started (another agent now has its id)");
  }
  if (!current.agent.enabled) return new RunnerCallError(RUN_FAILURE_CODES.agentUnavailable, "the run's agent was disabled before the run started");
  // Removed since the run was queued: nothing (and no one unsigned) is called in its place. Not retryable, unlike a
  // connection that failed: an event sent again binds no agent on a runner that is not registered (binding-resolution.ts).
  if (!current.runner || !current.service) return new RunnerCallError(RUN_FAILURE_CODES.unreachable, "the run's runner is no longer registered on this host");
  return null;
}

/** Both built by the same code from the same kind of input, so key order matches when the content does. */
const sameJson = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

/** The seed, the state snapshot and the grants' descriptors of a run, as statements to batch and a reader of their results. */
function runInputs(db: Db, job: RunJob, stateScopes: StateScopeKeys) {
  const scopes = Object.entries(stateScopes) as [StateScope, string][];
  const state = stateStore(db);
  const conversationId = job.conversation.conversation_id;
  // Insert-if-absent, so the seed is idempotent and never overwrites the runner's own value.
  const seeds = stateScopes.conversation && conversationId
    ? [state.seedStatement(stateScopes.conversation, SEEDED_CONVERSATION_ID_KEY, { runnerId: job.runner.runnerId, agentId: job.agent.agentId, agentEpoch: job.agent.stateEpoch ?? null }, "conversation", JSON.stringify(conversationId))]
    : [];
  // One query per scope so that a scope with many keys cannot crowd out another's.
  const reads = scopes.map(([, key]) => state.scopeSnapshotQuery(key));
  const descriptors = resourceDescriptorQueries(db, job.agent.resourcePolicy);
  return {
    statements: [...seeds, ...reads, ...descriptors] as unknown[],
    // Each result is read back by position.
    read(results: readonly unknown[]): { state: StateRead; descriptors: ResourceDescriptors } {
      const rowsOf = results.slice(seeds.length, seeds.length + reads.length) as { key: string; valueJson: string | null }[][];
      return {
        state: stateRead(scopes.map(([scope], i) => [scope, state.snapshotOf(rowsOf[i])])),
        descriptors: descriptorsFrom(results.slice(seeds.length + reads.length)),
      };
    },
  };
}

function stateRead(scopes: [StateScope, { values: Record<string, unknown>; complete: boolean }][]): StateRead {
  return { values: Object.fromEntries(scopes.map(([scope, read]) => [scope, read.values])), partial: scopes.filter(([, read]) => !read.complete).map(([scope]) => scope) };
}
