import { and, asc, eq, or, sql } from "drizzle-orm";
import { scopeView } from "../agents/policy";
import type { Db } from "../db/client";
import { agent } from "../db/schema";
import { parseJson } from "../lib/json";
import { resolutionValues, type ResolveQuery } from "./binding-resolution";

/** Agents named in a reason: enough to point at the one to fix, bounded whatever the operator created. */
const AGENTS_NAMED = 5;

/** The scopes an event falls under, most specific first, as binding tries them. */
function scopesOf(q: ResolveQuery): [string, string][] {
  const v = resolutionValues(q);
  const scopes: [string, string | null][] = [
    ["bot_conversation", v.bindBotChat],
    ["bot_conversation", v.bindBotConversation],
    ["workspace_conversation", v.bindWorkspaceChat],
    ["workspace_conversation", v.bindWorkspaceConversation],
    ["conversation", v.bindChatId],
    ["conversation", v.bindConversationId],
    ["bot", v.bindBotId],
    ["workspace", v.bindWorkspaceId],
    ["global", ""],
  ];
  return scopes.filter((s): s is [string, string] => s[1] !== null);
}

const scopeText = (scopeType: string, scopeId: string) => JSON.stringify(scopeView(scopeType, scopeId));

/**
 * Why no agent took an event, read when it went unbound (only then: nothing is read for an event an agent took):
 * the agents whose scope covers it, each disabled or not listing its type, or that none does. What an operator
 * would otherwise piece together from the event and every agent's scope, enabled flag and event_types.
 */
export async function unboundReason(db: Db, q: ResolveQuery): Promise<string> {
  const scopes = scopesOf(q);
  const specificity = sql`CASE ${agent.scopeType} ${sql.join(
    scopes.map(([type], i) => sql`WHEN ${type} THEN ${i}`),
    sql` `,
  )} END`;
  const agents = await db
    .select({ agentId: agent.agentId, scopeType: agent.scopeType, scopeId: agent.scopeId, enabled: agent.enabled, eventTypesJson: agent.eventTypesJson })
    .from(agent)
    .where(or(...scopes.map(([type, id]) => and(eq(agent.scopeType, type), eq(agent.scopeId, id)))))
    .orderBy(specificity, asc(agent.agentId))
    .limit(AGENTS_NAMED + 1);
  if (agents.length === 0) return `no agent's scope covers it (its bot, its workspace, its conversation, or global)`;
  const why = agents
    .slice(0, AGENTS_NAMED)
    .map((a) => {
      const types = parseJson<string[]>(a.eventTypesJson, []);
      const named = `agent ${a.agentId} (scope ${scopeText(a.scopeType, a.scopeId)})`;
      if (!a.enabled) return `${named} is disabled`;
      if (!types.includes(q.eventType)) return `${named} takes ${types.join(", ") || "no event types"}, not ${q.eventType}`;
      // Enabled and listing it now: it was changed after the event arrived.
      return `${named} takes it now (changed since the event arrived)`;
    });
  return `${why.join("; ")}${agents.length > AGENTS_NAMED ? "; …" : ""}`;
}
