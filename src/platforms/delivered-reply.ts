/**
 * A chat reply to a message this bot delivered, its context read from the host's own record rather than the platform:
 * Lark's answers are cards, which a read gives no words of, Telegram gives one message of an answer split over
 * several, as rendered, and Slack a thread's parent as rendered (to an app outside its Marketplace, once a minute).
 * The `delivery.succeeded` row of the platform message (found by its `message_ref`,
 * ../delivery/delivered-ref.ts) names the run and which of its transcript messages it shows: its words are that
 * message's, as the transcript has them (the final text, whatever the stream showed), its files the answer's artifacts,
 * re-used as the reply's inputs; a file's message brings that file alone. None of another audience's answer is given.
 */
import { and, desc, eq, getTableName, gte, inArray, sql } from "drizzle-orm";
import type { SQLiteColumn } from "drizzle-orm/sqlite-core";
import * as z from "zod";
import type { Db } from "../db/client";
import { eventLog } from "../db/schema";
import { parseJson } from "../lib/json";
import { asRecord } from "./http";
import type { ArtifactRef } from "../protocol/common";
import { artifactAccess, type ArtifactReader } from "../artifacts/policy";
import { artifactsStore, toArtifactRef } from "../stores/artifacts";
import { conversationKey } from "../stores/conversation-key";
import { PRIVATE_AUDIENCE_KEY, privateAudienceOf } from "./audience";
import { scopedMessageRef } from "./message-ref";
import type { ReplyContext } from "./reply-context";
import type { Bot, NormalizedEvent, PlatformFile } from "./types";

export interface DeliveredReply {
  text: string | null;
  /** Each with `artifactId` (re-used, not downloaded) and `repliedMessageId`. */
  files: PlatformFile[];
}

/**
 * A column of the row read, named in full: drizzle writes a select's own columns unqualified, which inside a subquery
 * would name the subquery's own (`t.run_id = "run_id"`: every run's item).
 */
const rowColumn = (column: SQLiteColumn) => sql`${sql.identifier(getTableName(eventLog))}.${sql.identifier(column.name)}`;

/** The run's event: the answer's audience is its. */
const runEvent = sql`json_extract(${rowColumn(eventLog.dataJson)}, '$.event_id')`;

/**
 * The run's transcript message the platform message shows: the trail's `item`-th of them, in order (FinalAnswer.itemOf).
 * `parts`: its content as elements (null for plain text), which name the files it showed by id as well as `refs`.
 */
const shownItem = sql<string | null>`(SELECT json_object('role', role, 'content', content, 'refs', json(artifact_refs_json), 'parts', json(content_json)) FROM
  (SELECT t.role, t.content, t.artifact_refs_json, t.content_json, row_number() OVER (ORDER BY t.seq) AS n FROM transcript AS t
    WHERE t.event_id = ${runEvent} AND t.run_id = ${rowColumn(eventLog.runId)} AND t.item_type = 'message')
  WHERE n = json_extract(${rowColumn(eventLog.dataJson)}, '$.item'))`;

/**
 * Deleted since (../stores/deleted-answer.ts): any of the message's delivery rows marked, not only its newest, as a
 * row written after the mark (an edit's whose trail write landed late, one made on the tombstone) does not undo it.
 */
const deletedSince = sql<number>`EXISTS (SELECT 1 FROM event_log AS d WHERE d.bot_id = ${rowColumn(eventLog.botId)}
  AND d.conversation_id = ${rowColumn(eventLog.conversationId)} AND d.message_ref = ${rowColumn(eventLog.messageRef)} AND d.event_type = 'delivery.succeeded' AND json_type(d.metadata_json, '$.recalled') IS NOT NULL)`;

/**
 * None of the run's items deleted by retention, which deletes each conversation's oldest items first
 * (src/retention/transcript.ts): an item at or before where the history stood when its event came (the run's
 * `latest_transcript_seq`: its event's own item, or the one before; the conversation's first when there was none) is
 * still there. Otherwise `item` would count from the run's first item left and name another message's words.
 */
const runItemsKept = sql<number>`EXISTS (SELECT 1 FROM run AS r JOIN transcript AS p ON p.conversation_key = r.conversation_key
  AND p.seq <= MAX(COALESCE(r.latest_transcript_seq, 0), 1) WHERE r.run_id = ${rowColumn(eventLog.runId)})`;

const audienceOfRun = sql<string | null>`(SELECT json_extract(e.metadata_json, ${`$.${PRIVATE_AUDIENCE_KEY}`}) FROM event_log AS e WHERE e.event_id = ${runEvent})`;

/**
 * The answer the bot delivered as message `messageId` of `event`'s chat, in the conversation it is in (placesOf), by
 * one read of the index event_log_message; null when it is none the host has a record of (another bot's or a user's
 * message, one delivered before this release recorded it, a notice no transcript message holds, a draft its failed run
 * left, one deleted since), or one of another conversation with files, which a run here may not read (read from the
 * platform and fetched then, as a received parent with files is: ./stored-reply.ts): the platform's account of it is
 * used then.
 */
export async function deliveredReply(db: Db, bot: Bot, event: NormalizedEvent, messageId: string): Promise<DeliveredReply | null> {
  if (event.conversationId === null) return null;
  const { conversationId } = event;
  const keyIn = (threadId: string | null) => conversationKey({ workspaceId: bot.workspaceId, botId: bot.botId, conversationId, threadId });
  const key = keyIn(event.threadId);
  const row = await db
    .select({ dataJson: eventLog.dataJson, runId: eventLog.runId, item: shownItem, audience: audienceOfRun, conversationKey: eventLog.conversationKey, deleted: deletedSince, kept: runItemsKept })
    .from(eventLog)
    .where(
      and(
        eq(eventLog.botId, bot.botId),
        eq(eventLog.conversationId, event.conversationId),
        eq(eventLog.messageRef, scopedMessageRef(event.chatId, messageId)),
        eq(eventLog.eventType, "delivery.succeeded"),
        gte(eventLog.createdAt, bot.registeredAt),
        inArray(eventLog.conversationKey, placesOf(event, messageId).map(keyIn)),
      ),
    )
    // Its newest write says what it shows now: a streamed draft's edit to the final text, or to a failed run's end mark.
    .orderBy(desc(eventLog.seq))
    .limit(1)
    .get();
  // Deleted since: the platform says so.
  if (!row || Number(row.deleted) !== 0 || (row.audience ?? null) !== privateAudienceOf(event.replyTarget)) return null;
  const fact = parseJson<{ operation?: unknown; artifact_id?: unknown }>(row.dataJson, {});
  const elsewhere = row.conversationKey !== key;
  const fileOf = (id: string, ref?: ArtifactRef): PlatformFile => ({ ref: id, name: ref?.name ?? null, mimeType: ref?.mime_type ?? null, artifactType: artifactTypeOf(ref), repliedMessageId: messageId, artifactId: id });
  if (fact.operation === "send_file" && typeof fact.artifact_id === "string") return elsewhere ? null : { text: null, files: [fileOf(fact.artifact_id)] };
  const item = parseJson<{ role?: unknown; content?: unknown; refs?: ArtifactRef[]; parts?: unknown } | null>(row.item ?? "", null);
  // Some of its run's items deleted since, the count no longer names it.
  if (item?.role !== "assistant" || Number(row.kept) === 0) return null;
  const reader = { conversationKey: row.conversationKey ?? "", runId: row.runId ?? "", audience: row.audience ?? null };
  const refs = await filesOfAnswer(db, reader, item.refs ?? [], item.parts);
  if (elsewhere && refs.length > 0) return null;
  return { text: typeof item.content === "string" ? item.content : null, files: refs.map((ref) => fileOf(ref.artifact_id, ref)) };
}

/**
 * An answer's files as delivery sent them (delivery/answer.ts answerOf): those announced before it (`refs`, checked
 * when recorded), then those its elements name (an upload shown as an image), each once. Those are the runner's
 * word alone: only one its run may read is taken, as delivery sent only those (delivery/files.ts), with its stored
 * facts; never one private to other eyes or of another conversation, which the reply would otherwise be given.
 * One expired since is taken, and the reply says so, as for `refs`.
 */
async function filesOfAnswer(db: Db, reader: ArtifactReader, refs: ArtifactRef[], parts: unknown): Promise<ArtifactRef[]> {
  const files = new Map(refs.map((ref) => [ref.artifact_id, ref]));
  const named = [...new Set(fileIdsOf(parts))].filter((id) => !files.has(id));
  if (!named.length) return [...files.values()];
  const rows = new Map((await artifactsStore(db).readBy(named, reader)).map((row) => [row.artifactId, row]));
  const now = Date.now();
  for (const id of named) {
    const row = rows.get(id);
    const access = row ? artifactAccess(row, reader, now) : "other_conversation";
    if (access === "granted" || access === "expired") files.set(id, toArtifactRef(row!));
  }
  return [...files.values()];
}

/** The artifact ids an answer's elements name, as delivery reads them (delivery/files.ts fileIdsOf): a URL's image is none. */
const fileIdsOf = (parts: unknown): string[] =>
  (Array.isArray(parts) ? parts.map(asRecord) : []).flatMap((el) => (el.type !== "text" && typeof el.artifact_id === "string" ? [el.artifact_id] : []));

/**
 * The threads (of the event's conversation) the replied message may be in: where the event says it is (a Slack
 * thread's parent: the channel's own, `repliedThreadId` null); else the reply's own, and for a Lark topic thread's root
 * also the chat's: "reply in thread" on an answer in the main chat opens a topic whose every reply names that answer.
 */
function placesOf(event: NormalizedEvent, messageId: string): (string | null)[] {
  if (event.repliedThreadId !== undefined) return [event.repliedThreadId];
  const root = event.replyTarget?.platform === "lark" && event.threadId !== null && event.replyTarget.threadRootId === messageId;
  return root ? [event.threadId, null] : [event.threadId];
}

const ARTIFACT_TYPES = new Set<string>(["image", "audio", "video", "file"]);
const artifactTypeOf = (ref?: ArtifactRef): PlatformFile["artifactType"] => (ARTIFACT_TYPES.has(ref?.artifact_type ?? "") ? (ref!.artifact_type as PlatformFile["artifactType"]) : "file");

/**
 * `event` replying to the bot's own answer: `reply_to` the answer as recorded (`given`: what the platform said of the
 * message that the record does not: its id, its sender as the platform names it, the part quoted), its files after
 * the event's own in place of any the platform gave of it, and addressed to the bot.
 */
export function withDeliveredReply(event: NormalizedEvent, delivered: DeliveredReply, given: Pick<ReplyContext, "message_id" | "actor" | "quote">): NormalizedEvent {
  const own = event.files.filter((f) => f.repliedMessageId === undefined);
  const replyTo: ReplyContext = { message_id: given.message_id, actor: given.actor, text: delivered.text, quote: given.quote, attachments: [], unavailable: null };
  return { ...event, files: [...own, ...delivered.files], data: { ...event.data, reply_to: replyTo }, addressed: true };
}

/** What Telegram gave of the replied message (./telegram/reply-context.ts), as far as this needs it. */
const GivenSchema = z.looseObject({
  message_id: z.union([z.number(), z.string()]),
  actor: z.looseObject({ actor_type: z.string(), actor_id: z.string(), actor_name: z.string().nullable() }).nullable(),
  quote: z.string().nullable(),
});

/**
 * A platform that gives the replied message whole (Telegram): when a bot sent it in this chat, and the host's record
 * says this bot delivered it, the answer as recorded; null otherwise.
 */
export async function withOwnAnswerReplied(db: Db, bot: Bot, event: NormalizedEvent): Promise<NormalizedEvent | null> {
  const given = GivenSchema.safeParse(event.data.reply_to).data;
  // A message of another chat (Telegram's external_reply, with no reply_to_message_id) has an id of that chat's, which
  // may number one of the bot's answers here.
  if (given?.actor?.actor_type !== "bot" || String(given.message_id) !== String(event.data.reply_to_message_id)) return null;
  const delivered = await deliveredReply(db, bot, event, String(given.message_id));
  return delivered && withDeliveredReply(event, delivered, { message_id: given.message_id, actor: given.actor, quote: given.quote });
}
