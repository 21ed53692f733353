import type { Db } from "../db/client";
import { conflict } from "../lib/errors";
import { parseJson } from "../lib/json";
import { agentsStore } from "../stores/agents";
import { ResourcePolicySchema } from "./policy";

type GrantKind = "models" | "tools" | "knowledge_bases";

/** The agents whose resource policy grants a resource `matches` picks (models as fallbacks too). */
async function agentsGranting(db: Db, kind: GrantKind, matches: (id: string) => boolean): Promise<string[]> {
  const agents = await agentsStore(db).list();
  return agents
    .filter((a) => {
      const policy = ResourcePolicySchema.safeParse(parseJson(a.resourcePolicyJson, {}));
      if (!policy.success) return false;
      const ids = kind === "models" ? [...policy.data.models, ...policy.data.fallback_models] : policy.data[kind];
      return ids.some(matches);
    })
    .map((a) => a.agentId);
}

/**
 * A resource an agent still grants is not deleted (409 naming the agents):
 * its runs would quietly lose it, and the agent could no longer be saved as
 * it is, since grants are checked against what is registered.
 */
export async function refuseIfGranted(db: Db, kind: GrantKind, what: string, matches: (id: string) => boolean): Promise<void> {
  const agents = await agentsGranting(db, kind, matches);
  if (agents.length) throw conflict(`${what} is granted to agent${agents.length > 1 ? "s" : ""} ${agents.join(", ")}: remove it from their resource_policy first`, { agents });
}
