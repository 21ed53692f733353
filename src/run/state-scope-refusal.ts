import type { StateScope } from "../protocol/context";

/** What identifies each scope in an event (PROTOCOL §9), as a refusal names it. */
const SCOPE_IDENTITY: Record<StateScope, string> = { conversation: "conversation_id", actor: "actor_type and actor_id", subject: "subject_type and subject_id", runner: "binding" };

/**
 * Why a run has no key for a state scope, as its refusals (a 403, a dropped `state.updated`) say it: the agent's
 * state_policy, or an event without the scope's identity, so a runner author looks where the cause is. `unidentified`
 * (the snapshot's scopes enabled but not identified) absent, the cause is left open.
 */
export function unavailableStateScope(scope: StateScope, unidentified?: readonly StateScope[]): string {
  if (!unidentified) return `state scope "${scope}" is not available for this run`;
  return unidentified.includes(scope)
    ? `state scope "${scope}" is enabled by the agent's state_policy, but this run's event has no ${SCOPE_IDENTITY[scope]}`
    : `state scope "${scope}" is not enabled by the agent's state_policy`;
}
