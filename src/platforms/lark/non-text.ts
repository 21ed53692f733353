/**
 * Lark messages with no words of their own that still say something a runner can read: a location, a shared chat or
 * contact card, a merged forward (whose messages are read from the API before the event is recorded: ./forwarded.ts).
 * Each reads as a line of words; the content as Lark sent it stays in `event.data.content`. A sticker (no emoji, and
 * Lark serves no sticker's picture), a red packet, a calendar event, a system message and the like stay unanswered.
 */
import * as z from "zod";
import { parseNested } from "../verify";

/** What a merged forward reads as until its messages are read (a paused bot's record keeps it). */
export const FORWARD_UNREAD = "[Forwarded messages, not read]";

// Lark sends the coordinates as strings; numbers are taken too.
const Coordinate = z.union([z.string().min(1), z.number()]);
const LocationSchema = z.looseObject({ name: z.string().optional(), latitude: Coordinate, longitude: Coordinate });
const SharedChatSchema = z.looseObject({ chat_id: z.string().min(1) });
const SharedUserSchema = z.looseObject({ user_id: z.string().min(1) });

/** The message types read here, whose parsed content `event.data.content` keeps. */
export const NON_TEXT_TYPES = new Set(["location", "share_chat", "share_user"]);

/** What a location, shared chat or shared contact says; null for anything else or content not of its shape. */
export function nonTextOf(messageType: string, c: Record<string, unknown>): string | null {
  if (messageType === "location") {
    const l = LocationSchema.safeParse(c);
    return l.success ? `📍 Location: ${l.data.latitude}, ${l.data.longitude}${l.data.name ? ` (${l.data.name})` : ""}` : null;
  }
  // A card names only its chat's or user's id: the name would take an API call (and permissions) of its own.
  if (messageType === "share_chat") return SharedChatSchema.safeParse(c).data ? `💬 Shared chat: ${String(c.chat_id)}` : null;
  if (messageType === "share_user") return SharedUserSchema.safeParse(c).data ? `👤 Shared contact: ${String(c.user_id)}` : null;
  return null;
}

/** The content of a message read here as Lark sent it, for `event.data.content`; nothing for other types. */
export function nonTextData(messageType: string, raw: string): { content?: unknown } {
  if (!NON_TEXT_TYPES.has(messageType)) return {};
  const content = parseNested(raw);
  return content === undefined ? {} : { content };
}
