import { sql, type SQL } from "drizzle-orm";
import { eventLog } from "../db/schema";
import { PLATFORMS, type NormalizedEvent, type PlatformName } from "./types";

/** Where a platform's `message.received` data holds the message's own id, as its recalls and edits name it (MessageRevision); Discord tells bots of neither. */
const MESSAGE_ID_FIELD: Record<PlatformName, "ts" | "message_id" | null> = { slack: "ts", telegram: "message_id", lark: "message_id", discord: null };

/**
 * The id a chat message is recorded under (EventLog `message_ref`), so a recall or edit finds it however old it is; null for any other event.
 * A Slack message shortcut is recorded under the message it was used on: its input is a copy of that message (words and
 * files), so the author's deletion withdraws the copy too, and an edit gives it the newest words.
 */
export function messageRefOf(platform: PlatformName, event: NormalizedEvent): string | null {
  const field = MESSAGE_ID_FIELD[platform];
  if (event.eventType !== "message.received" || field === null) return null;
  const id = platform === "slack" && event.sourceEventType === "message_action" ? event.data.message_ts : event.data[field];
  return typeof id === "string" || typeof id === "number" ? scopedMessageRef(event.chatId, String(id)) : null;
}

/** The platforms whose chat messages have a `message_ref`. */
export const PLATFORMS_WITH_MESSAGE_REF = PLATFORMS.filter((p) => MESSAGE_ID_FIELD[p] !== null);

/**
 * messageRefOf read from a recorded row's `data_json`, in SQL: for a row recorded before migration 0021, which has its
 * data but no `message_ref` (src/retention/message-refs.ts). Null where messageRefOf is: no such field, or one that is
 * neither text nor a number.
 */
export function recordedMessageRef(): SQL {
  const fields = PLATFORMS_WITH_MESSAGE_REF.map((p) => sql`WHEN ${p} THEN ${`$.${MESSAGE_ID_FIELD[p]}`}`);
  const path = sql`CASE WHEN ${eventLog.source} = 'slack' AND ${eventLog.sourceEventType} = 'message_action' THEN '$.message_ts' ELSE CASE ${eventLog.source} ${sql.join(fields, sql` `)} END END`;
  return sql`CASE WHEN json_type(${eventLog.dataJson}, ${path}) IN ('text', 'integer', 'real') THEN CAST(json_extract(${eventLog.dataJson}, ${path}) AS TEXT) END`;
}

/**
 * A message's ref in a conversation another chat continues: `chatId:id` when it is in that chat (moved-chats.ts), whose
 * ids restart (a supergroup's message 5 is not its group's message 5); the id alone in the conversation's own chat.
 */
export const scopedMessageRef = (chatId: string | undefined, id: string): string => (chatId === undefined ? id : `${chatId}:${id}`);
