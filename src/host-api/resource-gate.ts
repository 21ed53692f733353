import { RESOURCE_OPERATION_OF_ACTION } from "../protocol/host-api";
import type { AuthorizationSnapshot } from "../run/snapshot";
import { denied } from "./errors";

type ResourceAction = keyof typeof RESOURCE_OPERATION_OF_ACTION;

/** The param naming the resource of each group; also its id field in `ctx.resources`. */
const ID_PARAM = { models: "model_id", tools: "tool_name", knowledge_bases: "kb_id" } as const;
const NOUN = { models: "model", tools: "tool", knowledge_bases: "knowledge base" } as const;

/**
 * §8's resource check, before params are validated: the named resource must
 * be listed in the run's snapshot with the action's operation. A missing or
 * mistyped id is left to param validation (400).
 */
export function checkResourceGrant(snapshot: AuthorizationSnapshot, action: ResourceAction, params: Record<string, unknown>): void {
  const { group, operation } = RESOURCE_OPERATION_OF_ACTION[action];
  const id = params[ID_PARAM[group]];
  if (typeof id !== "string" || id === "") return;
  const listed = (snapshot.resources[group] as readonly Record<string, unknown>[]).find((r) => r[ID_PARAM[group]] === id);
  const operations = (listed?.operations ?? []) as readonly string[];
  if (!operations.includes(operation)) {
    // The runner's string, cut as the decision log cuts it: a denial's record stays small whatever was asked.
    const shown = id.length > 200 ? `${id.slice(0, 200)}…` : id;
    throw denied(`${NOUN[group]} "${shown}" is not granted to this run${listed ? ` for ${operation}` : ""}`, { action, group, resource_id: shown, operation });
  }
}

export function isResourceAction(action: string): action is ResourceAction {
  return Object.hasOwn(RESOURCE_OPERATION_OF_ACTION, action);
}
