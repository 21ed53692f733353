/**
 * A platform event in the conversation its chat continues. A Telegram group upgraded to a supergroup gets a new chat id
 * (the group is closed; its members go on in the supergroup): the supergroup's events are recorded in the group's
 * conversation, so its runs read the group's history and state, and queue, steer or interrupt in its Durable Object,
 * its runs in flight included. Each keeps where it happened: its reply goes to the supergroup (the reply target), its
 * `data.chat_id` names it, and its message id, which the supergroup numbers anew, is scoped by it (message-ref.ts), so
 * an edit there never reaches the group's message of the same number, nor does the platform's order compare the two.
 * An agent scoped to the chat itself still binds its events (ResolveQuery.chatId), and an edit of a message recorded
 * before the move was known reaches it in the chat's own conversation (revise-waiting.ts).
 */
import type { Db } from "../db/client";
import { conversationOfChat, recordChatMove } from "../stores/chat-moves";
import type { Bot, NormalizedEvent, PlatformAdapter } from "./types";

export async function inItsConversation(db: Db, adapter: PlatformAdapter, bot: Bot, event: NormalizedEvent): Promise<NormalizedEvent> {
  // Recorded before the event: the supergroup's own service message is then the first event of the group's conversation there.
  if (event.chatMove) await recordChatMove(db, bot, event.chatMove);
  const chatId = event.conversationId;
  // Only a chat that may continue another asks (a supergroup): private chats and groups cost nothing.
  if (chatId === null || !adapter.mayContinueChat?.(chatId)) return event;
  const conversationId = await conversationOfChat(db, bot, chatId);
  if (conversationId === null) return event;
  const revises = event.revises && { ...event.revises, chatId };
  return { ...event, conversationId, chatId, data: { ...event.data, chat_id: chatId }, ...(revises ? { revises } : {}) };
}
