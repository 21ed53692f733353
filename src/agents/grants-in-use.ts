import { sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { agent } from "../db/schema";
import { conflict } from "../lib/errors";
import { prefixUpperBound } from "../lib/key-range";

type GrantKind = "models" | "tools" | "knowledge_bases";

/** Where a policy lists each kind (models as fallbacks too), as migration 0010's triggers read them. */
const LISTS: Record<GrantKind, string[]> = { models: ["$.models", "$.fallback_models"], tools: ["$.tools"], knowledge_bases: ["$.knowledge_bases"] };

/**
 * The agents whose resource policy grants a resource `matches` picks, of those whose id starts with `prefix`. The
 * lists are read in the database (json_each): only ids and the matching grants travel, never every agent whole. The
 * database still reads each agent's policy, as the delete's own trigger does: grants inside JSON have no index.
 */
async function agentsGranting(db: Db, kind: GrantKind, prefix: string, matches: (id: string) => boolean): Promise<string[]> {
  const bound = prefixUpperBound(prefix);
  const below = bound === undefined ? sql`` : sql` AND g.value < ${bound}`;
  const lists = LISTS[kind].map(
    (path) => sql`SELECT ${agent.agentId}, g.value FROM ${agent}, json_each(${agent.resourcePolicyJson}, ${path}) AS g WHERE g.value >= ${prefix}${below}`,
  );
  const rows = await db.all<[string, unknown]>(sql`${sql.join(lists, sql` UNION ALL `)} ORDER BY 1`);
  return [...new Set(rows.filter(([, id]) => typeof id === "string" && matches(id)).map(([agentId]) => agentId))];
}

/**
 * A resource an agent still grants is not deleted (409 naming the agents):
 * its runs would quietly lose it, and the agent could no longer be saved as
 * it is, since grants are checked against what is registered. `prefix`: what
 * every id `matches` picks starts with (the id itself, or an MCP server's `{name}.`).
 */
export async function refuseIfGranted(db: Db, kind: GrantKind, what: string, prefix: string, matches: (id: string) => boolean): Promise<void> {
  const agents = await agentsGranting(db, kind, prefix, matches);
  if (agents.length) throw conflict(`${what} is granted to agent${agents.length > 1 ? "s" : ""} ${agents.join(", ")}: remove it from their resource_policy first`, { agents });
}
