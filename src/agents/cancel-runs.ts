import { dbOf } from "../db/connect";
import type { Env } from "../env";
import { loggedError } from "../lib/describe-error";
import { ownerOf } from "../run/owner";
import { agentRunsStore, type AgentAsCreated, type RunPosition, type UnendedKind } from "../stores/agent-runs";

/**
 * At most this many runs are cancelled by one agent DELETE: each is a call into its conversation's object, and one
 * Worker request makes a bounded number of subrequests. The rest are counted as left.
 */
export const AGENT_DELETE_CANCEL_MAX = 500;
const PAGE_SIZE = 100;
/** Cancels in flight at once: a conversation's object answers one in turn with its decisions, so they are spread. */
const AT_ONCE = 8;
/** Added to a cancelled run's error message. */
export const AGENT_DELETED = "its agent was deleted";

/** What an agent DELETE did to its runs not ended (README "What a DELETE leaves"). */
export interface AgentRunsOutcome {
  /** Not started yet: ended `cancelled` at once. */
  cancelled: number;
  /** Running: aborted as `POST /v1/runs/{id}/cancel` does; they end `cancelled` once their runner is stopped. */
  cancelling: number;
  /**
   * Not cancelled (left on purpose, past the cap, or their object unreachable): running ones go on, queued ones fail
   * `host.agent_unavailable` at their turn. Null when not known: the database failed while they were read.
   */
  left: number | null;
}

/** The runs an agent bound (as created) that have not ended, counted and left as they are. */
export async function leaveAgentRuns(env: Env, agent: AgentAsCreated): Promise<AgentRunsOutcome> {
  const store = agentRunsStore(dbOf(env));
  const outcome: AgentRunsOutcome = { cancelled: 0, cancelling: 0, left: null };
  return unlessReadFails(agent, outcome, async () => {
    outcome.left = (await store.count(agent, "running")) + (await store.count(agent, "not_started"));
  });
}

/**
 * Cancel the runs an agent bound (as created) that have not ended, through their conversations' objects (the
 * operator's cancel path). Called once the agent is deleted, so no new run binds it meanwhile. The queued ones first:
 * a running one aborted first would let the next of its conversation start meanwhile. The running ones keep their
 * share of the cap, as they are the ones still answering (a queued one left over fails at its turn anyway).
 */
export async function cancelAgentRuns(env: Env, agent: AgentAsCreated): Promise<AgentRunsOutcome> {
  const store = agentRunsStore(dbOf(env));
  const outcome: AgentRunsOutcome = { cancelled: 0, cancelling: 0, left: null };
  let [used, unreachable] = [0, 0];
  /** Cancels up to `budget` runs of a kind, oldest first; answers how many of that kind it did not reach. */
  const cancelKind = async (kind: UnendedKind, budget: number): Promise<number> => {
    for (let after: RunPosition | null = null; ; ) {
      if (budget === 0) return store.count(agent, kind, after);
      const limit = Math.min(PAGE_SIZE, budget);
      const page = await store.page(agent, kind, after, limit);
      [budget, used] = [budget - page.length, used + page.length];
      await eachAtMost(AT_ONCE, page, (r) => cancelOne(env, r.runId, outcome, () => unreachable++));
      if (page.length < limit) return 0;
      after = page[page.length - 1];
    }
  };
  return unlessReadFails(agent, outcome, async () => {
    const running = await store.count(agent, "running");
    const queuedLeft = await cancelKind("not_started", Math.max(0, AGENT_DELETE_CANCEL_MAX - running));
    const runningLeft = await cancelKind("running", AGENT_DELETE_CANCEL_MAX - used);
    outcome.left = queuedLeft + runningLeft + unreachable;
  });
}

/** The outcome as far as it got: a read that fails leaves `left` unknown (null), what was cancelled before it counted. */
async function unlessReadFails(agent: AgentAsCreated, outcome: AgentRunsOutcome, work: () => Promise<void>): Promise<AgentRunsOutcome> {
  try {
    await work();
  } catch (err) {
    // The agent is deleted already: the DELETE answers what it did rather than a 500 a retry would meet as a 404.
    console.error(`agent ${agent.agentId}: its runs were not all read after its delete: ${loggedError(err)}`);
  }
  return outcome;
}

async function cancelOne(env: Env, runId: string, outcome: AgentRunsOutcome, unreachable: () => void): Promise<void> {
  try {
    const answer = (await ownerOf(env, runId)?.cancel(runId, AGENT_DELETED)) ?? { cancelled: false as const };
    // Not cancelled: it ended meanwhile, or its runner had already sent its last result.
    if (answer.cancelled) outcome[answer.status]++;
  } catch (err) {
    // The agent is deleted already: one unreachable object does not fail the DELETE, nor stop the others' cancels.
    console.error(`run ${runId}: not cancelled with its deleted agent: ${loggedError(err)}`);
    unreachable();
  }
}

/** `work` on every item, at most `limit` at once. */
async function eachAtMost<T>(limit: number, items: T[], work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < items.length) await work(items[next++]);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
}
