import * as z from "zod";
import { dbOf } from "../db/connect";
import { decodeCursor, encodeCursor } from "../lib/cursor";
import { adminAuth } from "../middleware/admin-auth";
import { validate } from "../middleware/validate";
import { conversationKey } from "../stores/conversation-key";
import { eventLogStore, toOperatorEventView } from "../stores/event-log";
import { toTranscriptItem, transcriptStore } from "../stores/transcript";
import { decodeOr400, router } from "./app-env";
import { pageCursor, pageLimit } from "./query";

/** One conversation, named as events name it (its workspace, bot and thread when it has them), and a page of it. */
const ConversationQuery = z.strictObject({
  conversation_id: z.string().min(1).max(200),
  workspace_id: z.string().min(1).max(200).optional(),
  bot_id: z.string().min(1).max(200).optional(),
  thread_id: z.string().min(1).max(200).optional(),
  cursor: pageCursor.optional(),
  limit: pageLimit(200, 50),
});
const TranscriptQuery = ConversationQuery.extend({ include_artifacts: z.enum(["true", "false", "1", "0"]).default("true") });
/**
 * `after_cursor`: oldest first from just after a record (an event's own `cursor`), so an operator reads what followed
 * an event (its run's steering, delivery attempts and outcomes) in order, however much the conversation said since.
 */
const EventsQuery = ConversationQuery.extend({ after_cursor: pageCursor.optional() }).refine((q) => !(q.cursor && q.after_cursor), {
  message: "give cursor (newest first) or after_cursor (oldest first), not both",
});

const keyOf = (q: z.infer<typeof ConversationQuery>) =>
  conversationKey({ workspaceId: q.workspace_id, botId: q.bot_id, conversationId: q.conversation_id, threadId: q.thread_id });

/**
 * Operator reads of the facts the host keeps for a conversation, newest first
 * (EventLog also oldest first, after a record) and keyset-paged: its EventLog (ingress events and the host's own records:
 * steering, delivery, denials) and its Transcript.
 */
export const conversationsRouter = router()
  .use("*", adminAuth())
  .get("/events", validate("query", EventsQuery), async (c) => {
    const q = c.req.valid("query");
    const key = keyOf(q);
    const beforeSeq = q.cursor ? decodeOr400(() => decodeCursor("e", q.cursor!, key)) : undefined;
    const afterSeq = q.after_cursor ? decodeOr400(() => decodeCursor("e", q.after_cursor!, key)) : undefined;
    const { rows, hasMore } = await eventLogStore(dbOf(c.env)).page(key, { beforeSeq, afterSeq }, q.limit);
    const last = rows[rows.length - 1];
    if (afterSeq !== undefined) {
      // Always the position after the page, even its last one for now: polled again, it gives what is recorded next.
      return c.json({ items: rows.map(toOperatorEventView), has_more: hasMore, next_cursor: encodeCursor("e", last?.seq ?? afterSeq, key) });
    }
    return c.json({ items: rows.map(toOperatorEventView), has_more: hasMore, next_cursor: hasMore && last ? encodeCursor("e", last.seq, key) : undefined });
  })
  .get("/transcript", validate("query", TranscriptQuery), async (c) => {
    const q = c.req.valid("query");
    const key = keyOf(q);
    const beforeSeq = q.cursor ? decodeOr400(() => decodeCursor("t", q.cursor!, key)) : undefined;
    const artifacts = q.include_artifacts === "true" || q.include_artifacts === "1";
    const { rows, hasMore } = await transcriptStore(dbOf(c.env)).page(key, { direction: "backward", beforeSeq, limit: q.limit, artifactItems: artifacts });
    const last = rows[rows.length - 1];
    const items = rows.map((row) => toTranscriptItem(row, artifacts));
    return c.json({ items, has_more: hasMore, next_cursor: hasMore && last ? encodeCursor("t", last.seq, key) : undefined });
  });
