/**
 * The parent of the Slack thread a message is a reply in, as `event.data.reply_to` gives a replied message on every
 * platform (../reply-context.ts). An app subscribed only to `app_mention`, or added to the channel after the thread
 * began, never received it: "@Bot what do you think?" in the thread would reach the runner with no subject. Read with
 * conversations.replies (the thread's first message), taken as a `thread_broadcast` carries it (`root`), or as the
 * host recorded it (../stored-reply.ts; the bot's own answer, as delivered: ../delivered-reply.ts).
 */
import * as z from "zod";
import { HostError } from "../../lib/errors";
import { absentOr } from "../payload";
import type { RecordedReply, ReplyContext } from "../reply-context";
import type { Bot, NormalizedEvent, PlatformFile } from "../types";
import { slackCall, type SlackCredentials } from "./api";
import { readableSlackText } from "./inbound-text";
import { FileSchema, filesOf } from "./normalize";
import { sharedReads } from "./shared-read";

/** At most this long to read it: the reply's own files are fetched meanwhile (../own-files-alongside.ts), its files after. */
const READ_TIMEOUT_MS = 1_000;

/** The scope conversations.replies takes in each kind of channel (`channel_type`), for saying what the app lacks. */
const HISTORY_SCOPES: Record<string, string> = { channel: "channels:history", group: "groups:history", im: "im:history", mpim: "mpim:history" };

const ParentSchema = z.looseObject({
  ts: z.string(),
  subtype: absentOr(z.string()),
  user: absentOr(z.string()),
  bot_id: absentOr(z.string()),
  text: absentOr(z.string()),
  files: absentOr(z.array(FileSchema)),
});
const RepliesSchema = z.looseObject({ messages: z.array(z.unknown()) });

type ParentRead = { context: ReplyContext; files: PlatformFile[]; byThisBot: boolean };

/** The reads of this isolate, shared by a message's `message` and `app_mention` deliveries (./shared-read.ts). */
const shared = sharedReads<ParentRead>();

/**
 * Throws a 400 HostError when Slack does not give it: a scope missing (`channels:history`, `groups:history`), not in
 * the channel, rate limited, no answer in time, deleted. Whether the bot posted it is told by `parent_user_id`
 * (./addressed.ts), so `byThisBot` is never needed here. A `thread_broadcast` carries it (`root`): taken, not read.
 */
export function readSlackThreadParent(bot: Bot<SlackCredentials>, event: NormalizedEvent, timeoutMs: number): Promise<ParentRead> {
  const ts = String(event.repliesTo);
  const key = `${bot.botId}:${bot.registeredAt}:${event.key}:${ts}`;
  return shared(key, async () => parentOf(sentWith(event, ts) ?? (await readParent(bot, event, ts, timeoutMs)), ts), timeoutMs);
}

/** The parent as the event's payload carried it (a broadcast's `root`), when it is that message. */
function sentWith(event: NormalizedEvent, ts: string): z.infer<typeof ParentSchema> | null {
  const given = ParentSchema.safeParse(event.repliedAsSent);
  return given.success && given.data.ts === ts ? given.data : null;
}

async function readParent(bot: Bot<SlackCredentials>, event: NormalizedEvent, ts: string, timeoutMs: number): Promise<z.infer<typeof ParentSchema>> {
  const params = new URLSearchParams({ channel: event.conversationId ?? "", ts, limit: "1", inclusive: "true" });
  const got = await slackCall(bot, "conversations.replies", params, Math.min(timeoutMs, READ_TIMEOUT_MS));
  if (!got.ok) throw new HostError(400, "attachment_unavailable", `Slack did not give it: ${got.failure.message}${scopeNeeded(got.failure.message, event)}`);
  const first = ParentSchema.safeParse(RepliesSchema.safeParse(got.value).data?.messages[0]);
  if (!first.success) throw new HostError(400, "attachment_unavailable", "Slack did not give it: no such message");
  return first.data;
}

/** The parent as read or as a broadcast carried it; another message than the thread's first is none of it. */
function parentOf(m: z.infer<typeof ParentSchema>, ts: string): ParentRead {
  if (m.ts !== ts) throw new HostError(400, "attachment_unavailable", "Slack did not give it: no such message");
  // A parent deleted while its thread has replies stays as a tombstone ("This message was deleted.").
  if (m.subtype === "tombstone") throw new HostError(400, "attachment_unavailable", "it was deleted");
  const id = m.user ?? m.bot_id;
  const actor = id === undefined ? null : { actor_type: m.bot_id === undefined ? "user" : "bot", actor_id: id, actor_name: null };
  const context = { message_id: ts, actor, text: wordsOf(m.text ?? null), quote: null, attachments: [], unavailable: null };
  return { context, files: filesOf(m.files).map((f) => ({ ...f, repliedMessageId: ts })), byThisBot: false };
}

/**
 * `missing_scope`: which one, as the channel's type tells (Slack's own answer names it in `needed`, which the call does
 * not keep); an `app_mention` names no channel type, and a channel's id no longer tells a private one.
 */
function scopeNeeded(error: string, event: NormalizedEvent): string {
  if (error !== "missing_scope") return "";
  const scope = HISTORY_SCOPES[String(event.data.channel_type)];
  return scope ? ` (the app needs the ${scope} scope)` : " (the app needs the channels:history scope, groups:history in a private channel)";
}

/** Its words as a received message's read, every mention kept (the bot's own too: it is what was asked of it then). */
const wordsOf = (raw: string | null): string | null => (raw === null ? null : readableSlackText(raw, []));

/**
 * The parent as the host recorded it when the bot received it, read as readSlackThreadParent reads it: its words as
 * sent; edited since, its newest as history keeps them (an edit keeps no markup: the bot's own leading mention left out).
 */
export function recordedSlackThreadParent(m: RecordedReply): ReplyContext {
  const raw = typeof m.data.raw_text === "string" && !m.edited ? m.data.raw_text : null;
  return { message_id: m.messageId, actor: m.actor, text: raw === null ? m.text : wordsOf(raw), quote: null, attachments: [], unavailable: null };
}
