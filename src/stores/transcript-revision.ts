import { and, eq, gte, inArray, sql, type SQLWrapper } from "drizzle-orm";
import type { AnySQLiteColumn } from "drizzle-orm/sqlite-core";
import type { Db } from "../db/client";
import { eventLog, transcript } from "../db/schema";
import { searchTextOf } from "./fts-query";

/** A recall or an edit of a chat message, as it reaches the message's transcript item. */
export interface TranscriptRevision {
  botId: string;
  /**
   * When this registration of the bot id was made (Bot.registeredAt): a deleted bot's messages under the id are another
   * account's, whose ids may repeat (Telegram numbers a private chat's messages per bot).
   */
  registeredAt: number;
  /** The chat: every thread of it (a Lark recall does not name the topic its message was in). */
  conversationId: string;
  /** The message's own id on its platform (EventLog `message_ref`). */
  messageRef: string;
  /** The recall's or the edit's own event. */
  eventId: string;
  /**
   * Absent for a recall: the words now (null: none left, its files stay) and the edit's version; `minInterval`: applied
   * only when that much newer (in the version's units) than the edit applied last (a live location's positions).
   */
  edit?: { text: string | null; version: number; minInterval?: number };
}

/** SQL: the edit is newer than the one `metadata` says was applied, by `minInterval` at least when set. */
export function newerEdit(metadata: AnySQLiteColumn, edit: NonNullable<TranscriptRevision["edit"]>) {
  const applied = sql`COALESCE(json_extract(${metadata}, '$.edited.version'), -1e308)`;
  return edit.minInterval ? sql`${applied} <= ${edit.version - edit.minInterval}` : sql`${applied} < ${edit.version}`;
}

/** The EventLog row of the message a revision names (the index event_log_message), its transcript item's event. */
export const revisedMessageRow = (r: Pick<TranscriptRevision, "botId" | "registeredAt" | "conversationId" | "messageRef">) =>
  and(eq(eventLog.botId, r.botId), eq(eventLog.conversationId, r.conversationId), eq(eventLog.messageRef, r.messageRef), eq(eventLog.eventType, "message.received"), gte(eventLog.createdAt, r.registeredAt))!;

/**
 * The message's user item as its user left it, for what runners read afterwards (`history.page`, `history.search`):
 * recalled, it keeps its place with nothing of the message in it (no text, parts or files) and `metadata.recalled`;
 * edited, it reads the newest words (`metadata.edited`; an older edit arriving late changes nothing, nor does an
 * edit of a recalled message). The full-text index follows (migration 0002's triggers). EventLog keeps the message
 * as received, marked for runners' reads of it (event-revision.ts), and the recall or edit as an event of its own.
 * Idempotent: sent again, it matches nothing. Answers the item it changed (none when it changed nothing). `dropped`:
 * the artifacts of files an edit replaced (src/stores/recalled-files.ts), which its parts and refs name no more.
 */
export function transcriptRevisionStatement(db: Db, r: TranscriptRevision, at = new Date().toISOString(), dropped?: SQLWrapper) {
  const t = transcript;
  const message = db.select({ eventId: eventLog.eventId }).from(eventLog).where(revisedMessageRow(r));
  const itemOf = [inArray(t.eventId, message), eq(t.role, "user"), sql`json_type(${t.metadataJson}, '$.recalled') IS NULL`];
  if (!r.edit) {
    const recalled = JSON.stringify({ event_id: r.eventId, recalled_at: at });
    return db
      .update(t)
      .set({ content: null, searchText: null, contentJson: null, artifactRefsJson: "[]", metadataJson: sql`json_set(${t.metadataJson}, '$.recalled', json(${recalled}))` })
      .where(and(...itemOf))
      .returning({ eventId: t.eventId });
  }
  const edited = JSON.stringify({ event_id: r.eventId, version: r.edit.version, edited_at: at });
  return db
    .update(t)
    .set({
      content: r.edit.text,
      searchText: searchTextOf(r.edit.text),
      contentJson: dropped ? sql`CASE WHEN ${t.contentJson} IS NULL THEN NULL ELSE ${without(editedParts(t.contentJson, r.edit.text), dropped)} END` : editedParts(t.contentJson, r.edit.text),
      ...(dropped ? { artifactRefsJson: without(t.artifactRefsJson, dropped) } : {}),
      metadataJson: sql`json_set(${t.metadataJson}, '$.edited', json(${edited}))`,
    })
    .where(and(...itemOf, newerEdit(t.metadataJson, r.edit)))
    .returning({ eventId: t.eventId });
}

/**
 * A message with files keeps its parts in `content_json`, its text first (ingress/attachments.ts): the edit's words
 * replace that text part (or come first, or it goes), its files stay, as src/run/edited-input.ts does for a waiting run.
 */
export function editedParts(parts: typeof transcript.contentJson, text: string | null) {
  return sql<string | null>`CASE
    WHEN ${parts} IS NULL THEN NULL
    WHEN json_extract(${parts}, '$[0].type') = 'text' THEN (CASE WHEN COALESCE(${text}, '') = '' THEN json_remove(${parts}, '$[0]') ELSE json_set(${parts}, '$[0].text', ${text}) END)
    WHEN COALESCE(${text}, '') = '' THEN ${parts}
    ELSE '[' || json_object('type', 'text', 'text', ${text}) || CASE WHEN json_array_length(${parts}) > 0 THEN ',' || substr(json(${parts}), 2) ELSE ']' END
  END`;
}

/**
 * A JSON array of parts or refs without those naming an artifact among `dropped` (a subquery of artifact ids), the rest
 * in their order: an aggregate's input order is undefined without its own ORDER BY (SQLite 3.44+; libSQL's is 3.45.1).
 */
const without = (list: SQLWrapper, dropped: SQLWrapper) =>
  sql<string>`(SELECT json_group_array(json(value) ORDER BY key) FROM json_each(${list}) WHERE json_extract(value, '$.artifact_id') IS NULL OR json_extract(value, '$.artifact_id') NOT IN ${dropped})`;
