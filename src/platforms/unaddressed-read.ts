/**
 * What an event does not carry is read from the platform before it is recorded (a Lark merged forward's messages: a
 * message read, a contact lookup, a tenant token, within the webhook's deadline). A group's message that addresses no
 * one, bound to an agent that answers only what addresses the bot (trigger_policy `addressed`), is recorded unanswered
 * whatever it says: it is left unread, saying why. Ingress resolves the binding only in its one batch, after the read,
 * so this asks once before it, with that batch's own query over the binding's key (an index read in the host's own
 * database, against one to three calls to the platform's API for every such forward in a busy group), and only for an
 * event that may be left so: unaddressed, replying to nothing (a reply may turn out to be to the bot).
 */
import type { Db } from "../db/client";
import { TriggerPolicySchema } from "../agents/policy";
import { parseJson } from "../lib/json";
import { storableText } from "../lib/text";
import { loggedError } from "../lib/describe-error";
import { loggedText } from "../lib/log-text";
import { resolveBinding } from "../stores/binding-resolution";
import { recordContentRead } from "../stores/content-read";
import type { RecordedReply } from "./reply-context";
import type { Bot, NormalizedEvent, PlatformAdapter } from "./types";

/** Why what is recorded unanswered was not read. */
export const DECLINED = "it does not address the bot, and its agent answers only what does";

/** The agent that will leave `event` (unaddressed) unanswered, said `text`, as ingress's batch resolves it; null when none will. */
async function decliningAgent(db: Db, bot: Bot, event: { eventType: string; conversationId: string; chatId?: string }, text: string | null) {
  const [bound] = await resolveBinding(db, { ...event, botId: bot.botId, workspaceId: bot.workspaceId, unaddressed: true, text }).execute();
  return bound?.declines ? bound : null;
}

/** The event as recorded unread, or null when it is to be read (addressed, answered whatever it says, or unknown). */
export async function leftUnread(db: Db, adapter: PlatformAdapter, bot: Bot, event: NormalizedEvent): Promise<NormalizedEvent | null> {
  const notRead = adapter.contentNotRead;
  if (!notRead || event.addressed !== false || event.repliesTo !== undefined || event.eventType === null || event.conversationId === null) return null;
  const unread = notRead.event(event, DECLINED);
  // The text as ingress resolves it with (accept.ts): the agent's prefixes are matched against it.
  const text = unread.text === null ? null : storableText(unread.text);
  const bound = await decliningAgent(db, bot, { eventType: event.eventType, conversationId: event.conversationId, chatId: event.chatId }, text);
  if (!bound) return null;
  // A prefix that the text read could start with might have it answered: read, as for any agent answering it.
  const policy = TriggerPolicySchema.safeParse(parseJson(bound.agent.triggerPolicyJson, {}));
  const prefixes = policy.success ? policy.data.prefixes : null;
  if (prefixes === null || prefixes.some((p) => notRead.opening.startsWith(p) || p.startsWith(notRead.opening))) return null;
  return unread;
}

/** Whether `event` (unaddressed, its text final) is left unanswered by its agent: what it replies to is not read for it. */
export async function declinesUnaddressed(db: Db, bot: Bot, event: NormalizedEvent): Promise<boolean> {
  const { eventType, conversationId } = event;
  if (event.addressed !== false || eventType === null || conversationId === null) return false;
  const text = event.text === null ? null : storableText(event.text);
  return (await decliningAgent(db, bot, { eventType, conversationId, chatId: event.chatId }, text)) !== null;
}

/** Why a message is not read: it was taken back (a replied one, or a forward found so when read). */
export const RECALLED = "it was recalled";

/**
 * A replied message recorded unread (so, or not read in time, refused, a paused bot's) is read now for a reply
 * (`reply`) its agent will answer ("@Bot summarise this"): what it was left unread for. Read, it is written to its
 * record (`eventId`, ../stores/content-read.ts), so later replies (every message of a topic names its root) take it as
 * stored and nothing reads it again; found recalled (its recall missed), null, as for one recorded recalled. Not read
 * (refused, no answer in time), it stays unread and the next reply reads it again: a refusal costs that reply what
 * reading a message never recorded does, and is not held against a permission granted since. A reply left unanswered
 * in turn, and any other recorded message, read as recorded.
 */
export async function readIfLeftUnread(db: Db, adapter: PlatformAdapter, bot: Bot, reply: NormalizedEvent, recorded: RecordedReply & { eventId: string }, timeoutMs: number): Promise<RecordedReply | null> {
  const notRead = adapter.contentNotRead;
  if (!notRead || !adapter.readContent || !notRead.wasLeft(recorded)) return recorded;
  const { eventType, conversationId } = reply;
  const text = reply.text === null ? null : storableText(reply.text);
  if (reply.addressed === false && eventType !== null && conversationId !== null && (await decliningAgent(db, bot, { eventType, conversationId, chatId: reply.chatId }, text))) return recorded;
  const read = await adapter.readContent(bot, { ...reply, unread: true, text: recorded.text, data: recorded.data }, timeoutMs);
  if (read.text === notRead.event(reply, RECALLED).text) return null;
  const { eventId, ...rest } = recorded;
  const now = { ...rest, text: read.text === null ? null : storableText(read.text), data: read.data };
  // An edited record's words are its item's, not its row's: the write's guard (`was`) would hold for one only.
  if (recorded.text !== null && now.text !== null && !recorded.edited && !notRead.wasLeft(now)) {
    // The data the read set anew (readContent keeps what it did not read as it was given).
    const data = Object.fromEntries(Object.entries(now.data).filter(([key, value]) => recorded.data[key] !== value));
    // Best effort: a record not written is read again by the next reply, which is all it costs.
    await recordContentRead(db, { eventId, was: recorded.text, text: now.text, data }).catch((err: unknown) => {
      console.error(`bot ${bot.botId}: what message ${loggedText(recorded.messageId)} said once read was not recorded: ${loggedError(err)}`);
    });
  }
  return now;
}
