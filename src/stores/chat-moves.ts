/**
 * Chats that continue another chat's conversation, per bot (migration 0024): a Telegram group upgraded to a supergroup
 * gets a new chat id, and the supergroup's events are recorded in the group's conversation, so its runs keep the
 * group's history, state and Durable Object. Known moves are kept per isolate, so a chat asks the database at most once
 * (a move is never undone), and a chat without one about once a minute: such a chat's messages cost no round trip.
 */
import { and, eq, gte, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { insertWhereOnConflict } from "../db/guarded";
// The table as `botTable`: `bot` below is always the registration an event or reply came through.
import { bot as botTable, chatAlias } from "../db/schema";
import { loggedError } from "../lib/describe-error";
import { loggedId } from "../lib/log-text";
import type { Bot, ChatMove } from "../platforms/types";

type BotRef = Pick<Bot, "botId" | "registeredAt">;

/**
 * How long a chat found to continue no other is taken as such without asking again. A move recorded meanwhile by
 * another isolate (the webhook of the upgrade's service message, a reply refused in the group) is seen by this one
 * within that time; a supergroup's first messages come after its service message, so none is usually kept before.
 */
const UNMOVED_KEPT_MS = 60_000;
/** Chats kept per isolate; past it the map starts over (ids only, nothing secret). */
const KEPT_MAX = 4096;
const kept = new Map<string, { conversationId: string | null; until: number }>();

const keyOf = (bot: BotRef, chatId: string) => JSON.stringify([bot.botId, bot.registeredAt, chatId]);

function keep(bot: BotRef, chatId: string, conversationId: string | null): void {
  if (kept.size >= KEPT_MAX) kept.clear();
  kept.set(keyOf(bot, chatId), { conversationId, until: conversationId === null ? Date.now() + UNMOVED_KEPT_MS : Number.POSITIVE_INFINITY });
}

/** The conversation a chat's events are recorded in when it continues another chat's; null when it is its own. */
export async function conversationOfChat(db: Db, bot: BotRef, chatId: string): Promise<string | null> {
  const known = kept.get(keyOf(bot, chatId));
  if (known && known.until > Date.now()) return known.conversationId;
  const row = await db
    .select({ conversationId: chatAlias.conversationId })
    .from(chatAlias)
    // A move learned under an earlier registration of the bot id is another account's chat.
    .where(and(eq(chatAlias.botId, bot.botId), eq(chatAlias.chatId, chatId), gte(chatAlias.createdAt, bot.registeredAt)))
    .get();
  const conversationId = row?.conversationId ?? null;
  keep(bot, chatId, conversationId);
  return conversationId;
}

/**
 * `move.to` continues the conversation `move.from` is recorded in. Idempotent: the first record stays (both service
 * messages and any refused reply say the same), except one of an earlier registration of the bot id. Recorded only
 * while `bot` is still the bot id's registration (a bot DELETE removes its moves with it: src/stores/bots.ts).
 */
export async function recordChatMove(db: Db, bot: BotRef, move: ChatMove): Promise<void> {
  if (move.from === move.to) return;
  // Telegram upgrades a basic group, which continues no other chat: the lookup is for a platform that chains moves.
  const conversationId = (await conversationOfChat(db, bot, move.from)) ?? move.from;
  if (conversationId === move.to) return;
  // Only while the bot is still this registration of its id: a webhook or reply of a bot deleted (and perhaps registered
  // anew) meanwhile would leave a move its DELETE never removes, stamped later than the new registration, which takes it.
  const stillRegistered = sql`EXISTS (SELECT 1 FROM ${botTable} WHERE ${and(eq(botTable.botId, bot.botId), eq(botTable.createdAt, bot.registeredAt))})`;
  // A move stored under an earlier registration of the id is replaced; this one's own first record stays.
  const replacing = sql`ON CONFLICT (bot_id, chat_id) DO UPDATE SET conversation_id = excluded.conversation_id, created_at = excluded.created_at WHERE ${chatAlias.createdAt} < ${bot.registeredAt}`;
  await insertWhereOnConflict(db, chatAlias, { botId: bot.botId, chatId: move.to, conversationId, createdAt: Date.now() }, stillRegistered, replacing);
  // Read again on its next event: the record now stored (this one, or the first).
  kept.delete(keyOf(bot, move.to));
}

/** For a bot's replies: a move the platform answered a call with is recorded; a failure is logged, never the reply's. */
export const chatMoveNoter =
  (db: Db, bot: BotRef) =>
  (move: ChatMove): Promise<void> =>
    recordChatMove(db, bot, move).catch((err: unknown) => console.error(`bot ${bot.botId}: the chat's move to ${loggedId(move.to)} was not recorded: ${loggedError(err)}`));
