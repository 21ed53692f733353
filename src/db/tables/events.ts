/** What came in and what the conversation shows: EventLog and the Transcript. */
import { sql } from "drizzle-orm";
import { index, integer, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

/** EventLog: append-only record of every ingress event and host decision. */
export const eventLog = sqliteTable(
  "event_log",
  {
    seq: integer("seq").primaryKey({ autoIncrement: true }),
    eventId: text("event_id").notNull(),
    eventType: text("event_type").notNull(),
    eventTime: text("event_time"),
    source: text("source").notNull(),
    sourceEventType: text("source_event_type"),
    workspaceId: text("workspace_id"),
    botId: text("bot_id"),
    conversationKey: text("conversation_key"),
    conversationId: text("conversation_id"),
    threadId: text("thread_id"),
    actorType: text("actor_type"),
    actorId: text("actor_id"),
    actorName: text("actor_name"),
    subjectType: text("subject_type"),
    subjectId: text("subject_id"),
    inputJson: text("input_json"),
    inputSummary: text("input_summary"),
    dataJson: text("data_json").notNull().default("{}"),
    rawRef: text("raw_ref"),
    runId: text("run_id"),
    agentId: text("agent_id"),
    disposition: text("disposition"),
    // Random per ingress attempt: the writes that follow an event insert in the
    // same batch are guarded on it, so a duplicate event adds nothing.
    acceptId: text("accept_id"),
    metadataJson: text("metadata_json").notNull().default("{}"),
    // What an API event said (ingress/fingerprint.ts): a repeat of its event_id saying otherwise is refused. Null for
    // platform events (their redeliveries stay repeats) and for rows recorded before migration 0019.
    fingerprint: text("fingerprint"),
    // A chat message's own id on its platform (Slack ts, Telegram and Lark message_id), as its recalls and edits name it:
    // they find its transcript item by it, however old (migration 0021). Null for every other event.
    messageRef: text("message_ref"),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [
    uniqueIndex("event_log_event_id").on(t.eventId),
    index("event_log_message").on(t.botId, t.conversationId, t.messageRef).where(sql`${t.messageRef} IS NOT NULL`),
    index("event_log_conversation").on(t.conversationKey, t.seq),
    // Platform events only (HTTP events have none): retention asks which stored payloads are still named.
    index("event_log_raw_ref").on(t.rawRef).where(sql`${t.rawRef} IS NOT NULL`),
  ],
);

/** Transcript: the conversation view, sequenced per conversation key. */
export const transcript = sqliteTable(
  "transcript",
  {
    transcriptId: text("transcript_id").primaryKey(),
    conversationKey: text("conversation_key").notNull(),
    seq: integer("seq").notNull(),
    eventId: text("event_id").notNull(),
    runId: text("run_id"),
    conversationId: text("conversation_id"),
    threadId: text("thread_id"),
    role: text("role").notNull(),
    itemType: text("item_type").notNull(),
    content: text("content"),
    // What the full-text index reads instead of content when set: content with each character of a script written
    // without spaces (Chinese, Japanese, Thai, ...) as a word of its own, so a word inside a sentence is found.
    searchText: text("search_text"),
    contentJson: text("content_json"),
    artifactRefsJson: text("artifact_refs_json").notNull().default("[]"),
    metadataJson: text("metadata_json").notNull().default("{}"),
    createdAt: integer("created_at").notNull(),
  },
  (t) => [uniqueIndex("transcript_conversation_seq").on(t.conversationKey, t.seq), index("transcript_event").on(t.eventId)],
);
