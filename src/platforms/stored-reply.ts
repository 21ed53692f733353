/**
 * The message a chat reply answers, as the host stored it when the bot received it: its files are then already
 * artifacts of the conversation, re-used as the reply's inputs rather than downloaded (and stored) once more for every
 * reply to it (a Lark topic's messages all name its root), and on Lark its words and sender need no read of the API.
 */
import type { Db } from "../db/client";
import { parseJson } from "../lib/json";
import { conversationKey } from "../stores/conversation-key";
import { recordedMessage, type RecordedFile, type RecordedMessageRow } from "../stores/recorded-message";
import { PRIVATE_AUDIENCE_KEY, privateAudienceOf } from "./audience";
import { scopedMessageRef } from "./message-ref";
import type { RecordedReply } from "./reply-context";
import type { Bot, NormalizedEvent, PlatformFile } from "./types";

/**
 * `unknown`: not one the bot received in this conversation (thread), another audience's, or one some of whose files
 * are not (or no longer) stored: read and fetched from the platform. `recalled`: its user took it back, its files too.
 */
export type StoredReply = { state: "unknown" } | { state: "recalled" } | { state: "stored"; recorded: RecordedReply & { eventId: string }; files: PlatformFile[] };

const UNKNOWN: StoredReply = { state: "unknown" };

/** The message `messageId` that `event` replies to, as stored: one read (stores/recorded-message.ts). */
export async function storedReply(db: Db, bot: Bot, event: NormalizedEvent, messageId: string): Promise<StoredReply> {
  const { conversationId } = event;
  if (conversationId === null) return UNKNOWN;
  const keyIn = (threadId: string | null) => conversationKey({ workspaceId: bot.workspaceId, botId: bot.botId, conversationId, threadId });
  const key = keyIn(event.threadId);
  // Where it was recorded (a Slack thread's parent: in the channel's own conversation); its files count only if they are the reply's conversation's.
  const recordedIn = event.repliedThreadId === undefined ? key : keyIn(event.repliedThreadId);
  const row = await recordedMessage(db, { botId: bot.botId, registeredAt: bot.registeredAt, conversationId, conversationKey: recordedIn, messageRef: scopedMessageRef(event.chatId, messageId) });
  if (!row) return UNKNOWN;
  const metadata = parseJson<Record<string, unknown>>(row.metadataJson, {});
  // Never a file the reply's run may not read (stores/private-audience.ts): the reply's input would let it.
  if ((metadata[PRIVATE_AUDIENCE_KEY] ?? null) !== privateAudienceOf(event.replyTarget)) return UNKNOWN;
  if (metadata.recalled) return { state: "recalled" };
  // A file it had was left out (not fetched in time, refused, a paused bot's): fetched now, as for a message never received.
  if (metadata.attachments_unavailable) return UNKNOWN;
  const files = ownFiles(row, key, Date.now());
  if (files === null) return UNKNOWN;
  // Edited since: its newest words, which only its transcript item holds whole (none: read anew, as one never received).
  const edited = metadata.edited !== undefined;
  if (edited && row.editedWords === null) return UNKNOWN;
  const input = parseJson<{ text?: unknown }>(row.inputJson, {});
  const text = row.editedWords ? row.editedWords[0] : typeof input.text === "string" ? input.text : null;
  const actor = row.actorType === null || row.actorId === null ? null : { actor_type: row.actorType, actor_id: row.actorId, actor_name: row.actorName };
  const recorded = { eventId: row.eventId, messageId, actor, text, edited, data: parseJson<Record<string, unknown>>(row.dataJson, {}) };
  return { state: "stored", recorded, files: files.map((f) => fileOf(f, messageId)) };
}

/**
 * Its own files (not those of the message it replied to in turn, which its `reply_to` names), in its input's order;
 * null when one of them is no longer readable here: gone, expired, or not stored for it.
 */
function ownFiles(row: RecordedMessageRow, key: string, now: number): RecordedFile[] | null {
  const data = parseJson<{ reply_to?: { attachments?: { artifact_id?: unknown }[] } | null }>(row.dataJson, {});
  const replied = new Set((data.reply_to?.attachments ?? []).map((a) => a.artifact_id));
  const input = parseJson<{ attachments?: { artifact_id?: unknown }[] }>(row.inputJson, {});
  const own = (input.attachments ?? []).map((a) => a.artifact_id).filter((id) => !replied.has(id));
  const found = new Map(row.files.map((f) => [f.artifactId, f]));
  const usable = (f: RecordedFile | undefined): f is RecordedFile =>
    f !== undefined && f.source === "input" && f.eventId === row.eventId && f.conversationKey === key && (f.expiresAt === null || f.expiresAt > now);
  const files = own.map((id) => (typeof id === "string" ? found.get(id) : undefined));
  return files.every(usable) ? files : null;
}

const ARTIFACT_TYPES = new Set<PlatformFile["artifactType"]>(["image", "audio", "video", "file"]);

function fileOf(f: RecordedFile, messageId: string): PlatformFile {
  const artifactType = ARTIFACT_TYPES.has(f.artifactType as PlatformFile["artifactType"]) ? (f.artifactType as PlatformFile["artifactType"]) : "file";
  return { ref: f.artifactId, name: f.name, mimeType: f.mimeType, artifactType, repliedMessageId: messageId, artifactId: f.artifactId };
}
