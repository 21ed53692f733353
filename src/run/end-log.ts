import { loggedError } from "../lib/describe-error";
import { loggedId, loggedText } from "../lib/log-text";
import { RunnerCallError } from "../runner/errors";
import type { RunOutcome } from "../stores/runs";

/** What names a run on its log line. */
export interface LoggedRun {
  runId: string;
  agent?: { agentId: string };
  runner: { runnerId: string };
  conversation: { conversation_id?: string | null; bot_id?: string | null };
}

/** A code as a log line shows it: a runner's own code is free text, so one line stays one line. */
const shownCode = (code: string | null | undefined) => (code ? loggedText(code, 100) : "no code");

/**
 * One line per run that ended without completing (failed, timed out), for an operator reading the log: its code and
 * where it ran. Not a runner's message, nor the host's words about a runner (a bad line quoted): they may quote its
 * users (GET /v1/runs/{id} has them). `cause`, why the run ended: told when it is the host's own failure, which the run's
 * record may only call "the host failed while running" (describeError: never a query's bound values).
 */
export function logRunEnd(run: LoggedRun, outcome: RunOutcome, cause?: unknown): void {
  if (outcome.status !== "failed" && outcome.status !== "timeout") return;
  const names = [
    run.agent ? `agent ${run.agent.agentId}` : null,
    `runner ${run.runner.runnerId}`,
    // A platform's chat or channel id, as its webhook sent it: one line of the log whatever it holds.
    run.conversation.conversation_id ? `conversation ${loggedId(run.conversation.conversation_id)}` : null,
    run.conversation.bot_id ? `bot ${loggedId(run.conversation.bot_id)}` : null,
  ].filter((n) => n !== null);
  const why = cause === undefined ? "" : cause instanceof RunnerCallError ? (cause.code.startsWith("host.") ? `: ${loggedError(cause)}` : "") : `: ${loggedError(cause)}`;
  console.warn(`run ${run.runId}: ${outcome.status} (${shownCode(outcome.errorCode)}); ${names.join(", ")}${why}`);
}
