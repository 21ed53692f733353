/**
 * What a chat message replies to, for its runner (`event.data.reply_to`), in one shape on every platform that has
 * replies (Telegram gives the replied message whole, Lark names it by `parent_id` and the host reads it). In a group
 * the bot has mostly never received that message (privacy mode, or it mentioned no one): "@Bot what's this?" in reply
 * to a photo would reach the runner without the photo, and no history holds it. Its files are downloaded as the
 * event's own are and follow them in `input.attachments`; `attachments` names which they are.
 */
import type { InputAttachmentSource } from "../artifacts/input";
import type { ArtifactRef } from "../protocol/common";
import type { ArtifactRow } from "../stores/artifacts";
import { parseJson } from "../lib/json";

export interface ReplyContext {
  /**
   * As the platform's `message_id` in a message's data (Telegram a number, Lark a string); null for a Telegram message
   * of another chat whose id Telegram does not give (a private chat's, a basic group's).
   */
  message_id: number | string | null;
  /** Who sent it, as a message's actor reads (a chat speaking as itself is that chat); null when not known. */
  actor: { actor_type: string; actor_id: string; actor_name: string | null } | null;
  /** Its words (text or caption), read as a message's input is; null with none. */
  text: string | null;
  /** The part of it the user quoted, where the platform says so (Telegram); else null. */
  quote: string | null;
  /** Its files stored as this event's inputs (also in `input.attachments`, after the event's own files). */
  attachments: ArtifactRef[];
  /** Why the message could not be read (its words, sender and files unknown); null when it was. */
  unavailable: string | null;
  /**
   * Only for a Telegram message of another chat or forum topic (`external_reply`), whose `message_id` numbers that chat's
   * messages: the chat, as Telegram names it (a supergroup's or channel's only); null when it does not.
   */
  chat?: { chat_id: string; chat_title: string | null } | null;
}

/** The artifact metadata key naming the replied message a stored input file came from (its id, as a string). */
export const REPLIED_MESSAGE_KEY = "reply_to_message_id";

/**
 * A replied message as the host recorded it when the bot received it (./stored-reply.ts), which its adapter reads the
 * reply's context from rather than asking the platform (PlatformAdapter.recordedReplied).
 */
export interface RecordedReply {
  messageId: string;
  actor: ReplyContext["actor"];
  /** Its words as its own run had them, or its newest when it was edited since. */
  text: string | null;
  /** Edited since it was received: `text` is the edit's, and `data.raw_text` (the words as first sent) no longer says it. */
  edited: boolean;
  /** Its `data` as recorded. */
  data: Record<string, unknown>;
}

/** A reply whose message is known by id only, until (unless) it is read. */
export const unreadReply = (messageId: number | string, why: string): ReplyContext => ({ message_id: messageId, actor: null, text: null, quote: null, attachments: [], unavailable: why });

/**
 * `data` with `reply_to.attachments` naming the inputs that came from the replied message, in input order: those stored
 * now marked by REPLIED_MESSAGE_KEY in their metadata, and those re-used as that message's stored files (an `artifact`
 * source naming it); as given when none did (an API event's data is its own).
 */
export function withReplyAttachments(data: Record<string, unknown>, stored: { attachments: ArtifactRef[]; rows: ArtifactRow[]; sources: InputAttachmentSource[] }): Record<string, unknown> {
  const reply = data.reply_to;
  if (!reply || typeof reply !== "object" || !("message_id" in reply)) return data;
  const id = String(reply.message_id ?? "");
  const ids = new Set([
    ...stored.rows.filter((row) => parseJson<Record<string, unknown>>(row.metadataJson, {})[REPLIED_MESSAGE_KEY] === id).map((row) => row.artifactId),
    ...stored.sources.flatMap((s) => (s.kind === "artifact" && s.repliedMessageId === id ? [s.artifactId] : [])),
  ]);
  const replied = stored.attachments.filter((ref) => ids.has(ref.artifact_id));
  return replied.length ? { ...data, reply_to: { ...reply, attachments: replied } } : data;
}

/** The artifacts of the input that a chat reply re-used as its replied message's stored files (not stored for it). */
export function repliedArtifactIds(sources: InputAttachmentSource[] | undefined, attachments: ArtifactRef[]): string[] {
  const reused = new Set((sources ?? []).flatMap((s) => (s.kind === "artifact" && s.repliedMessageId !== undefined ? [s.artifactId] : [])));
  return attachments.flatMap((a) => (reused.has(a.artifact_id) ? [a.artifact_id] : []));
}
