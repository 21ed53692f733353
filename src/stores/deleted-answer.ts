import { and, eq, gte, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { eventLog } from "../db/schema";
import type { TranscriptRevision } from "./transcript-revision";

/**
 * A recall or a deletion naming a message the bot delivered (a Slack answer left as a tombstone, its thread having
 * replies): its `delivery.succeeded` rows marked `metadata.recalled`, as a received message's row is
 * (event-revision.ts), so a reply to it no longer takes the withdrawn answer from the record
 * (platforms/delivered-reply.ts) but is read from the platform, which says it was deleted. By the index
 * event_log_message; sent again, it matches nothing.
 */
export function deletedAnswerStatement(db: Db, r: Pick<TranscriptRevision, "botId" | "registeredAt" | "conversationId" | "messageRef" | "eventId">, at: string) {
  const m = eventLog.metadataJson;
  const recalled = JSON.stringify({ event_id: r.eventId, recalled_at: at });
  return db
    .update(eventLog)
    .set({ metadataJson: sql`json_set(${m}, '$.recalled', json(${recalled}))` })
    .where(
      and(
        eq(eventLog.botId, r.botId),
        eq(eventLog.conversationId, r.conversationId),
        eq(eventLog.messageRef, r.messageRef),
        eq(eventLog.eventType, "delivery.succeeded"),
        gte(eventLog.createdAt, r.registeredAt),
        sql`json_type(${m}, '$.recalled') IS NULL`,
      ),
    )
    .returning({ eventId: eventLog.eventId });
}

/**
 * The bot's own message deleted (a Slack message_deleted of its post, NormalizedEvent.deletesOwnMessage): its delivery
 * rows marked as above, and nothing else: not a recall (no one's words are withdrawn), so a message shortcut's copy
 * of it, recorded under the same ref, keeps its words and files. Sent again, it changes nothing.
 */
export async function markOwnMessageDeleted(db: Db, r: Pick<TranscriptRevision, "botId" | "registeredAt" | "conversationId" | "messageRef" | "eventId">): Promise<void> {
  await deletedAnswerStatement(db, r, new Date().toISOString());
}
