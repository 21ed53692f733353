/**
 * The message a reply answers, as read from the platform a moment ago for an earlier reply of the same conversation: a
 * Slack thread's replies all answer its parent, which an app outside Slack's Marketplace may read once a minute
 * (conversations.replies), so in a burst of replies each would spend a read and all but the first be refused. Only a
 * read that brought no file stands for later replies: the files one brought are that reply's own inputs (a recall of
 * it takes them), so a parent with files is read, and its files fetched, for each reply.
 */
import { sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { eventLog } from "../db/schema";
import { parseJson } from "../lib/json";
import { conversationKey } from "../stores/conversation-key";
import { PRIVATE_AUDIENCE_KEY, privateAudienceOf } from "./audience";
import { UNHANDLED_EVENT_TYPE } from "./record-only";
import type { ReplyContext } from "./reply-context";
import type { Bot, NormalizedEvent } from "./types";

/** How long a read stands for the replies after it: a parent edited or deleted since is read afresh past this. */
export const EARLIER_READ_MS = 10 * 60_000;

/**
 * How many of the thread's newest records are looked through for it: created_at is not in the conversation index, so
 * without a cap a thread with no such read would be walked whole on each reply. Each reply adds its own record and its
 * answer's delivery trail (two per platform call, more when streamed): a burst that outgrows it reads again.
 */
export const EARLIER_READ_ROWS = 500;

/**
 * The context an earlier reply in `event`'s conversation read of message `messageId`, files none; null when none did
 * lately, or when the message was recalled or edited since (recorded in the conversation the message is in: a recall,
 * or Slack's edit or tombstone of a message the host never recorded, named by `data.message_id`). One read: the newest
 * such read among the thread's newest records (the conversation index, newest first), then the recalls and edits
 * recorded after it (the same index, from its seq on: named, as left to choose the planner may walk every record of
 * every conversation since by the primary key).
 */
export async function readForEarlierReply(db: Db, bot: Bot, event: NormalizedEvent, messageId: string, now = Date.now()): Promise<ReplyContext | null> {
  const { conversationId } = event;
  if (conversationId === null || event.repliedThreadId === undefined) return null;
  const keyIn = (threadId: string | null) => conversationKey({ workspaceId: bot.workspaceId, botId: bot.botId, conversationId, threadId });
  const since = Math.max(bot.registeredAt, now - EARLIER_READ_MS);
  const [row] = await db.all<[string, string]>(sql`
    SELECT r.data_json, r.metadata_json FROM (
      SELECT seq, data_json, metadata_json FROM (
        SELECT seq, event_type, data_json, metadata_json, created_at FROM ${eventLog}
        WHERE conversation_key = ${keyIn(event.threadId)} ORDER BY seq DESC LIMIT ${EARLIER_READ_ROWS}
      )
      WHERE event_type = 'message.received' AND created_at >= ${since}
        AND json_extract(data_json, '$.reply_to.message_id') = ${messageId}
        -- Read whole: no reason given, no file of it stored or left out.
        AND json_type(data_json, '$.reply_to.unavailable') = 'null'
        AND json_array_length(data_json, '$.reply_to.attachments') = 0
        AND json_type(metadata_json, '$.attachments_unavailable') IS NULL
      ORDER BY seq DESC LIMIT 1
    ) r
    WHERE NOT EXISTS (
      SELECT 1 FROM ${eventLog} c INDEXED BY event_log_conversation
      WHERE c.conversation_key = ${keyIn(event.repliedThreadId)} AND c.seq > r.seq
        AND c.event_type IN ('message.recalled', ${UNHANDLED_EVENT_TYPE}) AND json_extract(c.data_json, '$.message_id') = ${messageId}
    )`);
  if (!row) return null;
  const metadata = parseJson<Record<string, unknown>>(row[1], {});
  if ((metadata[PRIVATE_AUDIENCE_KEY] ?? null) !== privateAudienceOf(event.replyTarget)) return null;
  return parseJson<{ reply_to?: ReplyContext }>(row[0], {}).reply_to ?? null;
}
