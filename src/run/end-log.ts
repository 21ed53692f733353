import { loggedError } from "../lib/describe-error";
import { mintedAtOfRun } from "../lib/ids";
import { loggedId, loggedText } from "../lib/log-text";
import { RunnerCallError } from "../runner/errors";
import type { RunOutcome } from "../stores/runs";

/** What names a run on its log line. */
export interface LoggedRun {
  runId: string;
  agent?: { agentId: string };
  runner: { runnerId: string };
  conversation: { conversation_id?: string | null; bot_id?: string | null };
  /** Where its event came from (`api`, a platform's name); absent for a run ended before its conversation had it. */
  event?: { source: string };
}

/** What a run's end knows of it beyond its outcome, all of it at hand (no database read). */
export interface RunEndFacts {
  /** Who recorded the end: the run's own execution, or the host closing it (lost, its own failure, cancelled before it started, never handed over). */
  endedBy: "run" | "host";
  /** When its runner was called; absent when it never was, or the instance that called it was lost. */
  calledAt?: number;
  /** Result lines read from its runner, duplicates and drops included; absent when not known here. */
  resultsRead?: number;
  /** Messages its `steering.pull` calls took in; absent when not known here. */
  steered?: number;
  /** Why it ended: told only when it is the host's own failure (its run record may only say "the host failed…"). */
  cause?: unknown;
  /**
   * When its end's write recorded it ended (the run's `ended_at`): a line logged later, by whoever found that write
   * applied though unanswered, is timed to it, not to when it was found. Absent: when the line is logged.
   */
  endedAt?: number;
}

/** An end whose write got no answer: its line, logged by whoever learns that the write was applied. */
export interface UnloggedEnd {
  outcome: RunOutcome;
  facts: RunEndFacts;
}

/** The line's own name, its first field: what a log query (or a test) picks the lines out by. */
export const RUN_ENDED = "run.ended";

/** A code as the line shows it: a runner's own code is free text, so it is cut and escaped as the text line had it. */
const shownCode = (code: string | null | undefined) => (code ? loggedText(code, 100) : null);

/** The host's own cause of a failure; a runner's failure (or a cancel, the deadline) is not told: its words may quote users. */
function hostCause(cause: unknown): string | null {
  if (cause === undefined) return null;
  if (cause instanceof RunnerCallError && !cause.code.startsWith("host.")) return null;
  return loggedError(cause);
}

/** Milliseconds from `from` to `to`, never below 0 (ingress and the conversation's object may read different clocks). */
const span = (from: number | null | undefined, to: number | null | undefined) => (from == null || to == null ? null : Math.max(0, to - from));

/**
 * The run's end as one JSON line: its status and code, where it ran, and how long it waited (from its event's
 * acceptance, the time its id was minted at, to its runner's call) and ran (from that call to its end). Never a
 * message, a runner's words nor a token; ids a platform chose escaped and cut as every log line has them.
 */
export function runEndedLine(run: LoggedRun, outcome: RunOutcome, facts: RunEndFacts): string {
  const acceptedAt = mintedAtOfRun(run.runId);
  const endedAt = facts.endedAt ?? Date.now();
  const { conversation_id, bot_id } = run.conversation;
  return JSON.stringify({
    log: RUN_ENDED,
    // Second, so a reader can tell a failure by the line's start (local/host.ts shows those alone).
    status: outcome.status,
    run_id: run.runId,
    error_code: shownCode(outcome.errorCode),
    ended_by: facts.endedBy,
    agent_id: run.agent?.agentId ?? null,
    runner_id: run.runner.runnerId,
    platform: run.event?.source ?? null,
    bot_id: bot_id ? loggedId(bot_id) : null,
    conversation_id: conversation_id ? loggedId(conversation_id) : null,
    queued_ms: facts.calledAt === undefined ? null : span(acceptedAt, facts.calledAt),
    duration_ms: span(facts.calledAt, endedAt),
    total_ms: span(acceptedAt, endedAt),
    results_read: facts.resultsRead ?? null,
    steered: facts.steered ?? null,
    cause: hostCause(facts.cause),
  });
}

/**
 * One line per run, when its end is recorded, for an operator counting runs, failures and latencies (Workers Logs /
 * Logpush index it). Logged where that end was written and by that write only, so a run has one line whatever
 * ended it. Failures and timeouts as warnings, as the text line they replace was.
 */
export function logRunEnd(run: LoggedRun, outcome: RunOutcome, facts: RunEndFacts): void {
  const line = runEndedLine(run, outcome, facts);
  if (outcome.status === "failed" || outcome.status === "timeout") console.warn(line);
  else console.log(line);
}
