/**
 * The message a reply answers, as read from the platform a moment ago for an earlier reply of the same conversation: a
 * Slack thread's replies all answer its parent, which an app outside Slack's Marketplace may read once a minute
 * (conversations.replies), so in a burst of replies each would spend a read and all but the first be refused. Only a
 * read that brought no file stands for later replies: the files one brought are that reply's own inputs (a recall of
 * it takes them), so a parent with files is read, and its files fetched, for each reply.
 */
import { and, desc, eq, gte, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { eventLog } from "../db/schema";
import { parseJson } from "../lib/json";
import { conversationKey } from "../stores/conversation-key";
import { PRIVATE_AUDIENCE_KEY, privateAudienceOf } from "./audience";
import type { ReplyContext } from "./reply-context";
import type { Bot, NormalizedEvent } from "./types";

/** How long a read stands for the replies after it: a parent edited or deleted since is read afresh past this. */
export const EARLIER_READ_MS = 10 * 60_000;

/** The context an earlier reply in `event`'s conversation read of message `messageId`, files none; null when none did lately. */
export async function readForEarlierReply(db: Db, bot: Bot, event: NormalizedEvent, messageId: string, now = Date.now()): Promise<ReplyContext | null> {
  if (event.conversationId === null) return null;
  const key = conversationKey({ workspaceId: bot.workspaceId, botId: bot.botId, conversationId: event.conversationId, threadId: event.threadId });
  const data = eventLog.dataJson;
  const row = await db
    .select({ dataJson: data, metadataJson: eventLog.metadataJson })
    .from(eventLog)
    .where(
      and(
        // The index event_log_conversation: the thread's own rows, newest first.
        eq(eventLog.conversationKey, key),
        eq(eventLog.eventType, "message.received"),
        gte(eventLog.createdAt, Math.max(bot.registeredAt, now - EARLIER_READ_MS)),
        sql`json_extract(${data}, '$.reply_to.message_id') = ${messageId}`,
        // Read whole: no reason given, no file of it stored or left out.
        sql`json_type(${data}, '$.reply_to.unavailable') = 'null'`,
        sql`json_array_length(${data}, '$.reply_to.attachments') = 0`,
        sql`json_type(${eventLog.metadataJson}, '$.attachments_unavailable') IS NULL`,
      ),
    )
    .orderBy(desc(eventLog.seq))
    .limit(1)
    .get();
  if (!row) return null;
  const metadata = parseJson<Record<string, unknown>>(row.metadataJson, {});
  if ((metadata[PRIVATE_AUDIENCE_KEY] ?? null) !== privateAudienceOf(event.replyTarget)) return null;
  return parseJson<{ reply_to?: ReplyContext }>(row.dataJson, {}).reply_to ?? null;
}
