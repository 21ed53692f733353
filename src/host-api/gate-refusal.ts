import { StateScopeSchema } from "../protocol/context";
import { StorageAreaSchema, type StorageArea } from "../protocol/host-api";
import { unavailableStateScope } from "../run/state-scope-refusal";
import type { AuthorizationSnapshot } from "../run/snapshot";

/** Why a storage area is refused: the event's missing workspace when the agent does grant it, else the grant. */
export function unavailableStorageArea(area: StorageArea, snapshot: Pick<AuthorizationSnapshot, "permissions" | "workspaceId">): string {
  if (area === "workspace" && snapshot.permissions.storage?.includes("workspace") && !snapshot.workspaceId) {
    return `storage area "workspace" is granted to this agent, but this run's event has no workspace_id`;
  }
  return `storage area "${area}" is not granted to this run (an area is when the runner's manifest asks for it and the agent's resource_policy.allow.storage names it)`;
}

/**
 * The message of a call refused because its API is not in the run's available_apis. A run with no state scope or
 * storage area at all is refused here, before its action runs: the refusal names the scope's or area's own cause
 * (an event without the identity, the agent's policy), as the action would, so a runner author looks where it is.
 */
export function gateRefusal(snapshot: Pick<AuthorizationSnapshot, "permissions" | "workspaceId" | "stateScopesUnidentified">, action: string, gate: string, params: Record<string, unknown>): string {
  const scope = StateScopeSchema.safeParse(params.scope);
  if (gate === "state" && scope.success) return unavailableStateScope(scope.data, snapshot.stateScopesUnidentified);
  const area = StorageAreaSchema.safeParse(params.area);
  if (gate === "storage" && area.success) return unavailableStorageArea(area.data, snapshot);
  return `${action} is not in this run's available_apis`;
}
