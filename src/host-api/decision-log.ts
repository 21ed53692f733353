import type { AuthorizationSnapshot } from "../run/snapshot";

/**
 * The fields (of a call's params, or of its refusal's details) that name what
 * the call touches. Only these reach the log: values (state, storage bytes,
 * messages, queries, tool arguments) never do.
 */
const RESOURCE_FIELDS = ["api", "conversation_id", "thread_id", "event_id", "artifact_id", "scope", "key", "prefix", "area", "model_id", "tool_name", "kb_id", "mode"] as const;
export const MAX_PARAM_CHARS = 200;

/** One §8 decision, as one JSON log line. */
export interface HostApiDecision {
  run_id: string;
  runner_id: string | null;
  /** null when the request was refused before its action was read (a bad token, a body that is too large or not JSON). */
  action: string | null;
  resource: Record<string, unknown>;
  /** The run's own conversation and thread. */
  scope: { conversation_id: string | null; thread_id: string | null };
  /** "allowed", or the AgentAPIError code the call was answered with. */
  outcome: string;
  status: number;
}

/** The identifying fields of a call's params or a refusal's details (strings only, each cut to 200 characters). */
export function resourceOf(fields: unknown): Record<string, string> {
  const resource: Record<string, string> = {};
  if (typeof fields !== "object" || fields === null) return resource;
  for (const name of RESOURCE_FIELDS) {
    const value = (fields as Record<string, unknown>)[name];
    if (typeof value === "string") resource[name] = value.slice(0, MAX_PARAM_CHARS);
  }
  return resource;
}

/** The scope part of a decision: the run's own conversation and thread. */
export function decisionScope(snapshot: Pick<AuthorizationSnapshot, "conversationId" | "threadId">): HostApiDecision["scope"] {
  return { conversation_id: snapshot.conversationId, thread_id: snapshot.threadId };
}

/**
 * §8: every decision is logged, allowed or not. One line on the Worker's log
 * (Workers Logs / Logpush in production); denials are also EventLog facts
 * (§12). Tokens and values are never part of it.
 */
export function logDecision(decision: HostApiDecision): void {
  console.log(JSON.stringify({ log: "host_api.decision", ...decision }));
}

/** A call refused before its action was read: a bad token (the run's snapshot, if any, names its runner) or a bad body. */
export function logRefusal(runId: string, snapshot: Pick<AuthorizationSnapshot, "runnerId" | "conversationId" | "threadId"> | null, outcome: string, status: number, action: string | null = null): void {
  const scope = snapshot ? decisionScope(snapshot) : { conversation_id: null, thread_id: null };
  // The id is the request path's, anyone's to choose: cut as a param is, so an anonymous call cannot make a line of any length.
  const shown = runId.length > MAX_PARAM_CHARS ? `${runId.slice(0, MAX_PARAM_CHARS)}…` : runId;
  logDecision({ run_id: shown, runner_id: snapshot?.runnerId ?? null, action, resource: {}, scope, outcome, status });
}
