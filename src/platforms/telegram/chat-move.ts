/**
 * Telegram upgrades a group to a supergroup under a new chat id, and says so by a service message in each: the group's
 * names the supergroup (`migrate_to_chat_id`), the supergroup's first names the group (`migrate_from_chat_id`).
 * Either one is enough for the host to follow (../moved-chats.ts); a reply refused in the group says it too (api.ts).
 */
import * as z from "zod";
import { absentOr } from "../payload";
import type { ChatMove } from "../types";

const ServiceMessageSchema = z.looseObject({
  chat: z.looseObject({ id: z.number() }),
  migrate_to_chat_id: absentOr(z.number()),
  migrate_from_chat_id: absentOr(z.number()),
});

/** The move an update's message announces, if it is one of those service messages. */
export function chatMoveOf(update: Record<string, unknown>): ChatMove | undefined {
  const m = ServiceMessageSchema.safeParse(update.message);
  if (!m.success) return undefined;
  const here = String(m.data.chat.id);
  if (m.data.migrate_to_chat_id !== undefined) return { from: here, to: String(m.data.migrate_to_chat_id) };
  if (m.data.migrate_from_chat_id !== undefined) return { from: String(m.data.migrate_from_chat_id), to: here };
  return undefined;
}

/** Only a supergroup (`-100…`, as channels are) may be a group's new chat: no other chat is looked up. */
export const mayContinueChat = (chatId: string): boolean => chatId.startsWith("-100");
