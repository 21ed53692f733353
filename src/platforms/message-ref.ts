import type { NormalizedEvent, PlatformName } from "./types";

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
  return typeof id === "string" || typeof id === "number" ? String(id) : null;
}
