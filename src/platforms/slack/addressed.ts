/**
 * Whether a Slack message addressed the bot (NormalizedEvent.addressed), for an agent that answers in a channel only
 * what does (trigger_policy). An app subscribed to `message.channels` (or `.groups`, `.mpim`) gets every message of
 * its channels, which such an agent records and leaves unanswered.
 */
import * as z from "zod";
import { absentOr } from "../payload";

/** What of a message tells: its event type, channel type, words as Slack sent them, and whose message its thread replies to. */
interface Message {
  type: string;
  channel_type?: string;
  text?: string;
  parent_user_id?: string;
  /** A `thread_broadcast`'s thread parent as Slack sends it along: it names no `parent_user_id`. */
  root?: unknown;
}

/** The bot as the envelope names it: its bot user, its app. */
interface Self {
  userIds: readonly string[];
  appId: string | null;
}

const RootSchema = z.looseObject({ user: absentOr(z.string()), bot_id: absentOr(z.string()), app_id: absentOr(z.string()), bot_profile: absentOr(z.looseObject({ app_id: absentOr(z.string()) })) });

/**
 * An `app_mention`; a DM (`im`: the bot is the only one there to ask; a message naming no channel type is taken for
 * one); a mention of the bot user anywhere in the words (`<@UBOT>`); or a reply in a thread the bot's message started.
 * Without the bot user in the envelope (`userIds` empty), a mention of anyone is taken for one of it: answered
 * rather than left unanswered.
 */
export function addressedOnSlack(m: Message, self: Self): boolean {
  if (m.type === "app_mention" || m.channel_type === undefined || m.channel_type === "im") return true;
  if (inThreadOfBot(m, self)) return true;
  const mentioned = [...(m.text ?? "").matchAll(/<@([A-Z0-9]+)(?:\|[^>]*)?>/gi)].map((x) => x[1]);
  return self.userIds.length === 0 ? mentioned.length > 0 : mentioned.some((id) => self.userIds.includes(id));
}

/**
 * Whose message started the thread: `parent_user_id`; a broadcast carries none, so its `root`'s poster, by its user or,
 * with none named (a legacy bot's post), by the app it came from.
 */
function inThreadOfBot(m: Message, self: Self): boolean {
  if (m.parent_user_id !== undefined) return self.userIds.includes(m.parent_user_id);
  const root = RootSchema.safeParse(m.root);
  if (!root.success) return false;
  if (root.data.user !== undefined) return self.userIds.includes(root.data.user);
  return root.data.bot_id !== undefined && self.appId !== null && (root.data.app_id ?? root.data.bot_profile?.app_id) === self.appId;
}
