/**
 * Whether a Slack message addressed the bot (NormalizedEvent.addressed), for an agent that answers in a channel only
 * what does (trigger_policy). An app subscribed to `message.channels` (or `.groups`, `.mpim`) gets every message of
 * its channels, which such an agent records and leaves unanswered.
 */

/** What of a message tells: its event type, channel type, words as Slack sent them, and whose message its thread replies to. */
interface Message {
  type: string;
  channel_type?: string;
  text?: string;
  parent_user_id?: string;
}

/**
 * An `app_mention`; a DM (`im`: the bot is the only one there to ask; a message naming no channel type is taken for
 * one); a mention of the bot user anywhere in the words (`<@UBOT>`); or a reply in a thread the bot's message started.
 * Without the bot user in the envelope (`botUserIds` empty), a mention of anyone is taken for one of it: answered
 * rather than left unanswered.
 */
export function addressedOnSlack(m: Message, botUserIds: readonly string[]): boolean {
  if (m.type === "app_mention" || m.channel_type === undefined || m.channel_type === "im") return true;
  if (m.parent_user_id !== undefined && botUserIds.includes(m.parent_user_id)) return true;
  const mentioned = [...(m.text ?? "").matchAll(/<@([A-Z0-9]+)(?:\|[^>]*)?>/gi)].map((x) => x[1]);
  return botUserIds.length === 0 ? mentioned.length > 0 : mentioned.some((id) => botUserIds.includes(id));
}
