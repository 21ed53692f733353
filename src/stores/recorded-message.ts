import { and, asc, eq, getTableName, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { artifact, eventLog, transcript } from "../db/schema";
import { revisedMessageRow, type TranscriptRevision } from "./transcript-revision";

/** An artifact row its message's recorded input names, as far as re-using it needs. */
export interface RecordedFile {
  artifactId: string;
  artifactType: string;
  mimeType: string | null;
  name: string | null;
  conversationKey: string | null;
  expiresAt: number | null;
  source: string;
  /** Its metadata's `event_id`: the event it was stored for. */
  eventId: unknown;
}

export interface RecordedMessageRow {
  eventId: string;
  actorType: string | null;
  actorId: string | null;
  actorName: string | null;
  inputJson: string | null;
  dataJson: string;
  metadataJson: string;
  /** In its input's order (an attachment naming no artifact row left out). */
  files: RecordedFile[];
  /**
   * Edited since (`metadata.edited`): its newest words, as its transcript item keeps them (the row keeps the message as
   * received, its mark only a head of them), `[words]` or `[null]`; null when not edited, or with no item to hold them.
   */
  editedWords: [string | null] | null;
}

/**
 * A Slack message shortcut's event is recorded under the message it was used on (platforms/message-ref.ts), its input a
 * copy of it but its actor whoever used the shortcut: for a recall or an edit, never for the message itself.
 */
const notACopy = sql`${eventLog.sourceEventType} IS NOT 'message_action'`;

type MessageQuery = Pick<TranscriptRevision, "botId" | "registeredAt" | "conversationId" | "messageRef"> & { conversationKey: string };

/**
 * A chat message of the conversation `conversationKey` as recorded when the bot received it, with the artifact rows
 * its input names: one read, the message by the index event_log_message (as a recall finds it), its files by primary
 * key. Undefined when the bot never received it here (another thread's, or before this registration of the bot).
 */
export async function recordedMessage(db: Db, q: MessageQuery): Promise<RecordedMessageRow | undefined> {
  const file = sql`json_object('artifactId', ${artifact.artifactId}, 'artifactType', ${artifact.artifactType}, 'mimeType', ${artifact.mimeType},
    'name', ${artifact.name}, 'conversationKey', ${artifact.conversationKey}, 'expiresAt', ${artifact.expiresAt}, 'source', ${artifact.source},
    'eventId', json_extract(${artifact.metadataJson}, '$.event_id'))`;
  const files = sql<string>`(SELECT json_group_array(${file} ORDER BY att.key) FROM json_each(${eventLog.inputJson}, '$.attachments') AS att JOIN ${artifact} ON ${artifact.artifactId} = json_extract(att.value, '$.artifact_id'))`;
  // By the index transcript_event, and only for a message edited since. Named in full: a column of a select's own
  // table is written unqualified, which inside the subquery would name the item's own `event_id`.
  const rowEventId = sql`${sql.identifier(getTableName(eventLog))}.${sql.identifier(eventLog.eventId.name)}`;
  const editedWords = sql<string | null>`CASE WHEN json_type(${eventLog.metadataJson}, '$.edited') IS NOT NULL THEN
    (SELECT json_array(${transcript.content}) FROM ${transcript} WHERE ${transcript.eventId} = ${rowEventId} AND ${transcript.role} = 'user' LIMIT 1) END`;
  const row = await db
    .select({
      eventId: eventLog.eventId,
      actorType: eventLog.actorType,
      actorId: eventLog.actorId,
      actorName: eventLog.actorName,
      inputJson: eventLog.inputJson,
      dataJson: eventLog.dataJson,
      metadataJson: eventLog.metadataJson,
      files,
      editedWords,
    })
    .from(eventLog)
    .where(and(revisedMessageRow(q), eq(eventLog.conversationKey, q.conversationKey), notACopy))
    .orderBy(asc(eventLog.createdAt))
    .limit(1)
    .get();
  if (!row) return undefined;
  return { ...row, files: JSON.parse(row.files ?? "[]") as RecordedFile[], editedWords: row.editedWords === null ? null : (JSON.parse(row.editedWords) as [string | null]) };
}
