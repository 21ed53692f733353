/**
 * Members who joined a chat together (one Telegram `new_chat_members` update, one Lark `users added` event: an admin
 * adding hundreds at once) are one occasion, welcomed once. The first member's event is recorded and handed over as
 * any join is, its `data.members` naming them (the first 1,000: `members_count` counts them all); the others are
 * recorded in one batch write, each an event of its own (its member its actor) that starts nothing: `merged` into the
 * first one's run (or as that event ended up: `unbound`, `rejected`, `bot_disabled`), `metadata.joined_with` naming
 * the first event. So a join of thousands is recorded well within a platform's acknowledgement deadline, and the chat
 * gets one welcome, not one per member.
 */
import { batchAll } from "../db/client";
import { dbOf } from "../db/connect";
import { eventLog } from "../db/schema";
import type { Env } from "../env";
import { storableText } from "../lib/text";
import { parseJson } from "../lib/json";
import { conversationKey } from "../stores/conversation-key";
import { eventLogStore } from "../stores/event-log";
import { messageRefOf } from "./message-ref";
import type { Bot, NormalizedEvent, Recorded } from "./types";

export const MEMBER_JOINED = "group.member_joined";

/** Rows per INSERT: ~20 columns each stays under SQLite's 999 placeholders however it was built. */
const ROWS_PER_STATEMENT = 40;

/**
 * At most this many members are named in `data.members`, which every run of the welcome carries in its context (a
 * payload of thousands would hand a model a roster it cannot read): `members_count` counts them all, and each one
 * beyond is still an event of its own.
 */
export const MEMBERS_LISTED = 1_000;

const nameOf = (event: NormalizedEvent) => (event.actor?.actor_name == null ? null : storableText(event.actor.actor_name));

/**
 * Who joined, as `data.members` lists them, in the platform's order: each as a run's `actor` is, since only the first
 * one's run is started (another bot added with them says `bot`; Lark's union_id and user_id are in `metadata`).
 */
const memberOf = (event: NormalizedEvent) => ({ actor_type: event.actor?.actor_type ?? "unknown", actor_id: event.actor?.actor_id ?? null, actor_name: nameOf(event), metadata: event.actor?.metadata ?? {} });

/** The first member's event, naming the members of the batch (itself first) and counting them. */
export const withMembers = (first: NormalizedEvent, all: NormalizedEvent[]): NormalizedEvent => ({ ...first, data: { ...first.data, members: all.slice(0, MEMBERS_LISTED).map(memberOf), members_count: all.length } });

/**
 * The other members' events, in the first one's conversation (a supergroup's joins recorded in its group's, as the
 * first was: moved-chats.ts), recorded as the first event ended up. A redelivery writes nothing twice.
 */
export async function recordJoinedWith(env: Env, bot: Bot, first: NormalizedEvent, firstEventId: string, others: NormalizedEvent[], ids: string[]): Promise<Recorded[]> {
  const db = dbOf(env);
  const leader = await eventLogStore(db).get(firstEventId);
  // Not recorded (it cannot be: it was written just before): nothing to join, and the platform's redelivery tries again.
  if (!leader) throw new Error(`event ${firstEventId} was not found after it was recorded`);
  const disposition = leader.disposition === "bound" ? "merged" : (leader.disposition ?? "unbound");
  const metadata = JSON.stringify({ ...parseJson<Record<string, unknown>>(leader.metadataJson, {}), joined_with: firstEventId });
  const key = conversationKey({ workspaceId: bot.workspaceId, botId: bot.botId, conversationId: first.conversationId!, threadId: first.threadId });
  const now = Date.now();
  const placed = others.map((e) => inFirstsConversation(e, first));
  const rows = placed.map((e, i) => ({
    eventId: ids[i],
    eventType: MEMBER_JOINED,
    eventTime: e.eventTime ?? leader.eventTime,
    source: bot.platform,
    sourceEventType: e.sourceEventType,
    workspaceId: bot.workspaceId,
    botId: bot.botId,
    conversationKey: key,
    conversationId: first.conversationId,
    threadId: first.threadId,
    actorType: e.actor?.actor_type ?? "unknown",
    actorId: e.actor?.actor_id ?? null,
    actorName: nameOf(e),
    inputJson: leader.inputJson,
    dataJson: JSON.stringify(e.data),
    rawRef: leader.rawRef,
    runId: leader.runId,
    agentId: leader.agentId,
    disposition,
    metadataJson: metadata,
    messageRef: messageRefOf(bot.platform, e),
    createdAt: now,
  }));
  const statements = [];
  for (let at = 0; at < rows.length; at += ROWS_PER_STATEMENT) statements.push(db.insert(eventLog).values(rows.slice(at, at + ROWS_PER_STATEMENT)).onConflictDoNothing());
  // One round trip for them all.
  if (statements.length) await batchAll(db, statements);
  return placed.map((event) => ({ event, disposition, runId: leader.runId }));
}

/** A member's event where the first one's was recorded: the same chat, so the same conversation (and chat_id, when moved). */
function inFirstsConversation(event: NormalizedEvent, first: NormalizedEvent): NormalizedEvent {
  if (first.chatId === undefined) return { ...event, conversationId: first.conversationId };
  return { ...event, conversationId: first.conversationId, chatId: first.chatId, data: { ...event.data, chat_id: first.chatId } };
}
