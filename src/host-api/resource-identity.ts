import type { ResourceIdentities } from "../resources/grants";
import type { ActionContext } from "./actions/context";
import { ApiError } from "./errors";

const KIND_NAME: Record<keyof ResourceIdentities, string> = { models: "model", tools: "tool", knowledge_bases: "knowledge base" };

/**
 * The resource read at call time under a granted id must be the one the run's snapshot froze (PROTOCOL §4): one
 * deleted and registered anew under that id since (another endpoint, another owner) was never granted to the run,
 * and is answered as the granted one being gone.
 */
export function assertSameResource(ctx: Pick<ActionContext, "snapshot">, kind: keyof ResourceIdentities, id: string, createdAt: number): void {
  const frozen = ctx.snapshot.resourceIdentities?.[kind][id];
  if (frozen === undefined || frozen === createdAt) return;
  throw new ApiError("not_found", `${KIND_NAME[kind]} ${id} was deleted and registered anew since this run started: the run may not use the new one`, { details: { [kind === "models" ? "model_id" : kind === "tools" ? "tool_name" : "kb_id"]: id } });
}
