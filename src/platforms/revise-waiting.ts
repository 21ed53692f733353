import { batchAll } from "../db/client";
import { artifactsOf } from "../artifacts/bucket";
import { dbOf } from "../db/connect";
import type { Env } from "../env";
import { storableText } from "../lib/text";
import { eventRevisionStatement } from "../stores/event-revision";
import { deletedAnswerStatement } from "../stores/deleted-answer";
import { deleteRecalledBytes, recalledFilesStatements, replacedArtifactIds, replacedFilesStatements } from "../stores/recalled-files";
import { transcriptRevisionStatement, type TranscriptRevision } from "../stores/transcript-revision";
import { waitingMessage } from "../stores/waiting-message";
import { scopedMessageRef } from "./message-ref";
import type { Bot, MessageRevision } from "./types";

/**
 * At most once per this many seconds of its edits (Telegram's `edit_date`), a live location's new position reaches its
 * message: while it moves, what later runs read of it is at most a minute old, and its last position, once its sharing
 * stops (an edit that is no live position), is the message's at once.
 */
export const LIVE_POSITION_SECONDS = 60;

/**
 * A recall or an edit (its event `eventId`) reaches the message it names: its transcript item and what runners read
 * of its EventLog record, however old, read as the user left it (src/stores/transcript-revision.ts,
 * event-revision.ts), so no later run reads words withdrawn or replaced, and a recalled message's files are gone
 * (recalled-files.ts); and while the message still waits to be answered, whatever agent binds the recall (or none),
 * the conversation's object withdraws it, or gives it its new words, unless a runner has it already
 * (durable-objects/waiting-revisions.ts). Nothing is asked of that object when nothing may be waiting. A failure fails
 * the webhook: the platform sends it again, and doing it again changes nothing more. `deadlineAt`: when the platform
 * wants its answer, which bounds the recalled files' delete too (a best effort: the retention sweep takes what it leaves).
 */
export async function reviseMessage(env: Env, bot: Bot, conversationId: string, eventId: string, revision: MessageRevision, deadlineAt?: number): Promise<void> {
  const db = dbOf(env);
  // The new words as ingress would have recorded them: NUL and unpaired surrogates replaced, as the runner reads any text.
  const edit = revision.edit && { ...revision.edit, text: revision.edit.text === null ? null : storableText(revision.edit.text) };
  const marked = edit && revision.livePosition ? { ...edit, minInterval: LIVE_POSITION_SECONDS } : edit;
  const places = placesOf(conversationId, revision.chatId);
  const now = Date.now();
  const at = new Date(now).toISOString();
  // One batch: the transcript item, the record's mark and the files' expiry are never left apart.
  const statements: unknown[] = [];
  const fileReads: number[] = [];
  for (const place of places) {
    const r: TranscriptRevision = { botId: bot.botId, registeredAt: bot.registeredAt, conversationId: place.conversationId, messageRef: scopedMessageRef(place.chatId, revision.id), eventId, edit: marked };
    // An edit that replaced the message's file (a Telegram photo swapped): its item lists the file no more.
    const dropped = edit && revision.files ? replacedArtifactIds(db, r, revision.files) : undefined;
    statements.push(transcriptRevisionStatement(db, r, at, dropped), eventRevisionStatement(db, r, at));
    // A recall may name the bot's own answer instead (a Slack tombstone): a reply to it then takes nothing of it.
    if (!edit) fileReads.push(statements.push(...recalledFilesStatements(db, r, now), deletedAnswerStatement(db, r, at)) - 2);
    // An edit that replaced the message's file (a Telegram photo swapped): the file it had goes as a recalled one's.
    else if (revision.files) fileReads.push(statements.push(...replacedFilesStatements(db, r, revision.files, now)) - 1);
  }
  const results = await batchAll(db, statements);
  const files = fileReads.flatMap((i) => results[i] as { r2Key: string; artifactId: string }[]);
  if (files.length) await deleteRecalledBytes(artifactsOf(env, deadlineAt), files.map((f) => f.r2Key));
  // A live position too soon after the one applied changed nothing (an edit's statements are the marks alone), so
  // nothing waiting is asked about (a redelivery of one applied whose waiting run was not reached asks nothing either:
  // the next position applied reaches it).
  if (revision.livePosition && (results as unknown[][]).every((rows) => rows.length === 0)) return;
  for (const place of places) {
    const waiting = await waitingMessage(db, { botId: bot.botId, source: bot.platform, conversationId: place.conversationId, field: revision.field, id: revision.id, chatId: place.chatId ?? null });
    if (!waiting) continue;
    const conversation = env.CONVERSATIONS.get(env.CONVERSATIONS.idFromName(waiting.conversationKey));
    // A waiting run's input loses a replaced file as its transcript item did (its artifact expired: a runner would read a 404).
    const dropped = edit && files.length ? { dropped: files.map((f) => f.artifactId) } : {};
    await conversation.revise({ eventId: waiting.eventId, runId: waiting.runId, steered: waiting.disposition === "steered", edit: edit && { ...edit, ...dropped } });
    return;
  }
}

/**
 * Where the revised message may be recorded: in the conversation, under the id scoped by its chat when that chat
 * continues another's (moved-chats.ts); and then also in that chat's own conversation under its bare id, where its
 * messages went until the host learned of the move (a Telegram supergroup's first messages, its service message missed).
 */
function placesOf(conversationId: string, chatId: string | undefined): { conversationId: string; chatId?: string }[] {
  return chatId === undefined ? [{ conversationId }] : [{ conversationId, chatId }, { conversationId: chatId }];
}
