import { and, eq, or, sql } from "drizzle-orm";
import { compiled, param } from "../db/compiled";
import { qualifiedConversationKey } from "../agents/policy";
import type { Db } from "../db/client";
import { agent, agentBinding as b, runner, runnerService } from "../db/schema";

export interface ResolveQuery {
  eventType: string;
  conversationId?: string | null;
  botId?: string | null;
  workspaceId?: string | null;
  /** A group's message that did not address the bot (NormalizedEvent.addressed false): its agent's trigger_policy decides. */
  unaddressed?: boolean;
  /** Such a message, an item of a Telegram album: never `unaddressed` here, its run joins its album's or ends so (RunJob.joinsAlbumOnly). */
  albumItem?: boolean;
  /** What the user said, which the agent's prefixes are looked for at the start of. */
  text?: string | null;
  /**
   * The chat the event happened in, when it continues another chat's conversation (a Telegram supergroup its group's:
   * src/platforms/moved-chats.ts): a conversation scope naming that chat binds it too, and first (the chat is where it
   * was said), as it did before the host learned of the move.
   */
  chatId?: string | null;
}

/**
 * The one agent for an event: the most specific enabled scope that lists the
 * event type (the binding key allows at most one per scope). Written over
 * placeholders, so the ingress batch can resolve, write with what it
 * resolved, and read it back, in one transaction and with SQL built once.
 */
const bindingMatch = () =>
  and(
    eq(b.eventType, param("bindEventType")),
    or(
      and(eq(b.scopeType, "global"), eq(b.scopeId, "")),
      // A null placeholder matches nothing: a scope the event lacks never binds it.
      and(eq(b.scopeType, "bot_conversation"), eq(b.scopeId, param("bindBotConversation"))),
      and(eq(b.scopeType, "workspace_conversation"), eq(b.scopeId, param("bindWorkspaceConversation"))),
      and(eq(b.scopeType, "conversation"), eq(b.scopeId, param("bindConversationId"))),
      and(eq(b.scopeType, "bot_conversation"), eq(b.scopeId, param("bindBotChat"))),
      and(eq(b.scopeType, "workspace_conversation"), eq(b.scopeId, param("bindWorkspaceChat"))),
      and(eq(b.scopeType, "conversation"), eq(b.scopeId, param("bindChatId"))),
      and(eq(b.scopeType, "bot"), eq(b.scopeId, param("bindBotId"))),
      and(eq(b.scopeType, "workspace"), eq(b.scopeId, param("bindWorkspaceId"))),
    ),
  );
/**
 * Most specific first. A scope naming the chat (ResolveQuery.chatId) before any naming the conversation it continues,
 * whatever their types: before the host learned of the move only the chat's bound its events, and still does.
 */
const specificity = () => sql`CASE WHEN (${b.scopeType} = 'bot_conversation' AND ${b.scopeId} = ${param("bindBotChat")})
  OR (${b.scopeType} = 'workspace_conversation' AND ${b.scopeId} = ${param("bindWorkspaceChat")})
  OR (${b.scopeType} = 'conversation' AND ${b.scopeId} = ${param("bindChatId")}) THEN 0 ELSE 1 END,
  CASE ${b.scopeType} WHEN 'bot_conversation' THEN 0 WHEN 'workspace_conversation' THEN 1
  WHEN 'conversation' THEN 2 WHEN 'bot' THEN 3 WHEN 'workspace' THEN 4 ELSE 5 END`;
const chosen = () => sql`FROM ${b} INNER JOIN ${agent} ON ${agent.agentId} = ${b.agentId}
  INNER JOIN ${runner} ON ${runner.runnerId} = ${agent.runnerId}
  INNER JOIN ${runnerService} ON ${runnerService.serviceId} = ${runner.serviceId}
  WHERE ${bindingMatch()} ORDER BY ${specificity()} LIMIT 1`;

/** SQL subquery: the chosen agent's id (null when none binds). */
export const chosenAgentId = () => sql<string | null>`(SELECT ${agent.agentId} ${chosen()})`;

/**
 * Over the chosen agent's row: it leaves the event unanswered, a group's message that did not address the bot while
 * the agent answers only those that do (trigger_policy), unless the text starts with one of its prefixes. Decided here,
 * in ingress's one batch, with the agent it binds: an unaddressed message costs no round trip and no run row.
 */
const declines = () => sql`(${param("bindUnaddressed")} = 1 AND json_extract(${agent.triggerPolicyJson}, '$.group_messages') = 'addressed'
  AND NOT EXISTS (SELECT 1 FROM json_each(${agent.triggerPolicyJson}, '$.prefixes') AS p WHERE substr(${param("bindText")}, 1, length(p.value)) = p.value))`;

/** SQL: what the event is recorded as: `bound` to the chosen agent, `unaddressed` (it declines it), or `unbound`. */
export const chosenDisposition = () =>
  sql<string>`COALESCE((SELECT CASE WHEN ${declines()} AND ${param("bindAlbumItem")} = 0 THEN 'unaddressed' ELSE 'bound' END ${chosen()}), 'unbound')`;

/** The placeholder values of a resolution (their own names, so they mix with a statement's other values); an absent scope id is null. */
export function resolutionValues(q: ResolveQuery) {
  return {
    bindEventType: q.eventType,
    bindBotConversation: q.botId && q.conversationId ? qualifiedConversationKey(q.botId, q.conversationId) : null,
    bindWorkspaceConversation: q.workspaceId && q.conversationId ? qualifiedConversationKey(q.workspaceId, q.conversationId) : null,
    bindConversationId: q.conversationId || null,
    bindBotChat: q.botId && q.chatId ? qualifiedConversationKey(q.botId, q.chatId) : null,
    bindWorkspaceChat: q.workspaceId && q.chatId ? qualifiedConversationKey(q.workspaceId, q.chatId) : null,
    bindChatId: q.chatId || null,
    bindBotId: q.botId || null,
    bindWorkspaceId: q.workspaceId || null,
    bindUnaddressed: q.unaddressed ? 1 : 0,
    bindAlbumItem: q.albumItem ? 1 : 0,
    bindText: q.text ?? null,
  };
}

const resolve = compiled((db) =>
  db
    // Of the service, only what the job needs: not its manifest (the runner row has its own part), nor its secret.
    .select({ agent, runner, service: { serviceId: runnerService.serviceId, baseUrl: runnerService.baseUrl }, declines: sql<number>`CASE WHEN ${declines()} THEN 1 ELSE 0 END` })
    .from(b)
    .innerJoin(agent, eq(agent.agentId, b.agentId))
    .innerJoin(runner, eq(runner.runnerId, agent.runnerId))
    .innerJoin(runnerService, eq(runnerService.serviceId, runner.serviceId))
    .where(bindingMatch())
    .orderBy(specificity())
    .limit(1),
);

/** The chosen agent with its runner and service (zero or one row), to batch. */
export const resolveBinding = (db: Db, q: ResolveQuery) => resolve(db, resolutionValues(q));

export type BoundAgent = Awaited<ReturnType<ReturnType<typeof resolveBinding>["execute"]>>[number];

/**
 * The agent as it is now, with its runner and the service's address and secret (as stored), read when a
 * run starts: a run queued before an edit runs with the agent as edited. Runner and service are null
 * when no longer registered; no row when the agent was deleted.
 */
const current = compiled((db) =>
  db
    .select({ agent, runner, service: { serviceId: runnerService.serviceId, baseUrl: runnerService.baseUrl, secret: runnerService.secret } })
    .from(agent)
    .leftJoin(runner, eq(runner.runnerId, agent.runnerId))
    .leftJoin(runnerService, eq(runnerService.serviceId, runner.serviceId))
    .where(eq(agent.agentId, param("agentId"))),
);

/** To batch with a run's claim. */
export const currentAgentStatement = (db: Db, agentId: string) => current(db, { agentId });

export type CurrentAgent = Awaited<ReturnType<ReturnType<typeof currentAgentStatement>["execute"]>>[number];
