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
import { resolveBinding } from "../stores/binding-resolution";
import type { Bot, NormalizedEvent, PlatformAdapter } from "./types";

const WHY = "it does not address the bot, and its agent answers only what does";

/** The event as recorded unread, or null when it is to be read (addressed, answered whatever it says, or unknown). */
export async function leftUnread(db: Db, adapter: PlatformAdapter, bot: Bot, event: NormalizedEvent): Promise<NormalizedEvent | null> {
  const notRead = adapter.contentNotRead;
  if (!notRead || event.addressed !== false || event.repliesTo !== undefined || event.eventType === null || event.conversationId === null) return null;
  const unread = notRead.event(event, WHY);
  // The text as ingress resolves it with (accept.ts): the agent's prefixes are matched against it.
  const text = unread.text === null ? null : storableText(unread.text);
  const [bound] = await resolveBinding(db, { eventType: event.eventType, conversationId: event.conversationId, botId: bot.botId, workspaceId: bot.workspaceId, unaddressed: true, text }).execute();
  if (!bound?.declines) return null;
  // A prefix that the text read could start with might have it answered: read, as for any agent answering it.
  const policy = TriggerPolicySchema.safeParse(parseJson(bound.agent.triggerPolicyJson, {}));
  const prefixes = policy.success ? policy.data.prefixes : null;
  if (prefixes === null || prefixes.some((p) => notRead.opening.startsWith(p) || p.startsWith(notRead.opening))) return null;
  return unread;
}
