import { sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { eventLog, run } from "../db/schema";
import { NOT_STARTED } from "./runs";

/** A chat message that may still be waiting to be answered: its event, its conversation, and the run holding it (its own, the one it was steered into, or its album's). */
export interface WaitingMessage {
  eventId: string;
  conversationKey: string;
  runId: string;
  /** `merged`: an album's item, joined into the run of the album's first (durable-objects/albums.ts). */
  disposition: "bound" | "steered" | "merged";
}

export interface MessageQuery {
  botId: string;
  source: string;
  /** The chat: every thread of it is looked at (a Lark recall does not name the topic its message was in). */
  conversationId: string;
  /** Where the message's `message.received` data holds the platform's id for it, and that id. */
  field: "ts" | "message_id";
  id: string;
  /** The chat the message is in when the conversation is another chat's (its `data.chat_id`); null or absent: its own. */
  chatId?: string | null;
}

/**
 * The message a recall or an edit names, if it may be waiting: only a conversation with a run not ended yet holds
 * messages waiting, and only those recorded since that run's own event. One round trip, bounded by the runs not
 * ended (the status index) and, per conversation, by those events (the conversation index); undefined when none is.
 * The status index is named: left to choose, the planner walks every run of the chat (run_conversation_id, or after
 * ANALYZE the whole run_conversation index), a cost that grows with the chat's history on each recall or edit.
 */
export async function waitingMessage(db: Db, q: MessageQuery): Promise<WaitingMessage | undefined> {
  const unended = sql.join([...NOT_STARTED, "running"].map((s) => sql`${s}`), sql`, `);
  const [row] = await db.all<[string, string, string, string]>(sql`
    SELECT e.event_id, e.conversation_key, e.run_id, e.disposition
    FROM (SELECT r.conversation_key AS k, MIN(o.seq) AS s FROM ${run} r INDEXED BY run_status JOIN ${eventLog} o ON o.event_id = r.event_id
          WHERE r.status IN (${unended}) AND r.bot_id = ${q.botId} AND r.conversation_id = ${q.conversationId} GROUP BY r.conversation_key) p
    JOIN ${eventLog} e ON e.conversation_key = p.k AND e.seq >= p.s
    WHERE e.event_type = 'message.received' AND e.source = ${q.source} AND e.disposition IN ('bound', 'steered', 'merged') AND e.run_id IS NOT NULL
      AND CAST(json_extract(e.data_json, ${`$.${q.field}`}) AS TEXT) = ${q.id} AND json_extract(e.data_json, '$.chat_id') IS ${q.chatId ?? null}
    ORDER BY e.seq DESC LIMIT 1`);
  return row ? { eventId: row[0], conversationKey: row[1], runId: row[2], disposition: row[3] as WaitingMessage["disposition"] } : undefined;
}
