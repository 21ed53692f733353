import { eq, type SQL } from "drizzle-orm";
import { eqUnindexed } from "../db/unindexed";
import { run } from "../db/schema";
import type { TimeIdPosition } from "../lib/cursor";

/** GET /v1/runs's filters. */
export interface RunListFilter {
  conversationId?: string;
  threadId?: string;
  workspaceId?: string;
  botId?: string;
  agentId?: string;
  status?: string;
  before?: TimeIdPosition;
  limit: number;
}

/**
 * GET /v1/runs's conditions on ids, written so the page is read from the narrowest index that serves it, the others'
 * terms left unindexed (the planner, without statistics, cannot tell which is narrower): a conversation's runs
 * (run_conversation_id), else the few not ended (`status=created` or `running`: run_status), else an agent's
 * (run_agent), a bot's (run_bot), a workspace's (run_workspace). Never a walk of every run newest first until the page
 * is full; an ended status narrows nothing (most runs have one), so it is read with the id's index.
 */
export function runListConditions(f: RunListFilter): SQL[] {
  const unended = f.status === "created" || f.status === "running";
  const byAgent = !f.conversationId && !unended;
  const byBot = byAgent && !f.agentId;
  const byWorkspace = byBot && !f.botId;
  const conds: SQL[] = [];
  if (f.conversationId) conds.push(eq(run.conversationId, f.conversationId));
  if (f.threadId) conds.push(eq(run.threadId, f.threadId));
  if (f.workspaceId) conds.push(byWorkspace ? eq(run.workspaceId, f.workspaceId) : eqUnindexed(run.workspaceId, f.workspaceId));
  if (f.botId) conds.push(byBot ? eq(run.botId, f.botId) : eqUnindexed(run.botId, f.botId));
  if (f.agentId) conds.push(byAgent ? eq(run.agentId, f.agentId) : eqUnindexed(run.agentId, f.agentId));
  return conds;
}
