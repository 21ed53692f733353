/**
 * The message a Lark message replies to, as read by id (./get-message.ts), in the shape every platform gives a reply's
 * message (`event.data.reply_to`, ../reply-context.ts): its sender, its words read as a received message's are (the
 * mentions by name), and its files, downloaded with the event's own from that message's resources.
 */
import * as z from "zod";
import { HostError } from "../../lib/errors";
import type { RecordedReply, ReplyContext } from "../reply-context";
import type { Bot, PlatformFile } from "../types";
import type { LarkCredentials } from "./api";
import { cardText } from "./card-text";
import { forwardTranscript } from "./forwarded";
import { getLarkMessage, type LarkMessage } from "./get-message";
import { contentOf, withMentionNames } from "./normalize";

/** At most this long to read it: the event's own files are fetched meanwhile (../own-files-alongside.ts), its files in what is left of Lark's 3 s. */
const READ_TIMEOUT_MS = 1_000;

/** Throws a 400 HostError when Lark does not give it (not found, no permission, no answer in time) or it was recalled. */
export async function readLarkReplied(bot: Bot<LarkCredentials>, messageId: string, timeoutMs: number): Promise<{ context: ReplyContext; files: PlatformFile[]; byThisBot: boolean }> {
  const until = Date.now() + Math.min(timeoutMs, READ_TIMEOUT_MS);
  const got = await getLarkMessage(bot, messageId, until - Date.now());
  if (!got.ok) throw new HostError(400, "attachment_unavailable", `Lark did not give it: ${got.failure.message}`);
  const m = got.value[0];
  const read = replyOf(m);
  // A merged forward's messages came in the same answer: "@Bot summarise this" gets them, as the forward's own event
  // would have (the bot may never have received it, or not in this thread), not its placeholder line.
  if (m.msg_type === "merge_forward") read.context.text = (await forwardTranscript(bot, got.value, until - Date.now())).text;
  // The API names an app's message by its app_id: a reply to this bot's own addresses it (trigger_policy).
  return { ...read, byThisBot: m.sender?.sender_type === "app" && m.sender.id === bot.credentials.app_id };
}

function replyOf(m: LarkMessage): { context: ReplyContext; files: PlatformFile[] } {
  if (m.deleted) throw new HostError(400, "attachment_unavailable", "it was recalled");
  // A card (another app's, a notice of this bot's) reads as its words, as in a forward (./card-text.ts).
  const content = m.msg_type === "interactive" ? { text: cardText(m.body?.content ?? ""), files: [] } : contentOf(m.msg_type, m.body?.content ?? "", m.mentions);
  const text = m.msg_type === "text" ? withMentionNames(content.text, m.mentions) : content.text;
  // An app's message names the app (`sender_type: app`): a bot, as a Telegram bot's message reads.
  const actor = m.sender?.id ? { actor_type: m.sender.sender_type === "app" ? "bot" : (m.sender.sender_type ?? "user"), actor_id: m.sender.id, actor_name: null } : null;
  return {
    context: { message_id: m.message_id, actor, text, quote: null, attachments: [], unavailable: null },
    files: content.files.map((file) => ({ ...file, repliedMessageId: m.message_id })),
  };
}

const MentionsSchema = z.array(z.looseObject({ key: z.string(), name: z.string().optional() }));

/**
 * The replied message as recorded when the bot received it, read as readLarkReplied reads it: a text message's words
 * as sent (its `raw_text`, the bot's own mention kept) with each mention by name; any other's as its run had them.
 */
export function recordedLarkReplied(m: RecordedReply): ReplyContext {
  const raw = m.data.message_type === "text" && typeof m.data.raw_text === "string" && !m.edited ? m.data.raw_text : null;
  const text = raw === null ? m.text : withMentionNames(raw, MentionsSchema.safeParse(m.data.mentions).data ?? []);
  return { message_id: m.messageId, actor: m.actor, text, quote: null, attachments: [], unavailable: null };
}
