/**
 * Telegram Bot API updates in the host's terms. Identity: a chat is a
 * conversation (`chat.id`); a forum topic is its thread (`message_thread_id`
 * when `is_topic_message`). Telegram does not tell bots about deletions, so
 * there is no `message.recalled` here.
 */
import * as z from "zod";
import type { NormalizedEvent } from "../types";
import { unhandledEvent as unhandled } from "../unhandled";
import { platformTime } from "../../lib/json";
import { withoutNulls } from "../payload";
import { actorOf, chatActorOf, SenderChatSchema, UserSchema } from "./actor";
import { withLinkTargets } from "./link-targets";
import { repliedOf, repliesToTopicOpening } from "./reply-context";
import { FileFieldsSchema, filesOf } from "./files";
import { nonTextOf } from "./non-text";
import { CALLBACK_QUERY, normalizeCallbackQuery } from "./callback";
import { addressedOnTelegram, mayNameABot } from "./addressed";

const MessageSchema = FileFieldsSchema.extend({
  message_id: z.number(),
  date: z.number(),
  chat: z.looseObject({ id: z.number(), type: z.string(), title: z.string().optional() }),
  from: UserSchema.optional(),
  /** Set when a chat speaks (an anonymous group admin, a linked channel): `from` is then a placeholder bot. */
  sender_chat: SenderChatSchema.optional(),
  message_thread_id: z.number().optional(),
  is_topic_message: z.boolean().optional(),
  text: z.string().optional(),
  entities: z.array(z.unknown()).optional(),
  caption: z.string().optional(),
  caption_entities: z.array(z.unknown()).optional(),
  new_chat_members: z.array(UserSchema).optional(),
  /** A linked channel's post, copied by Telegram into the channel's discussion group. */
  is_automatic_forward: z.boolean().optional(),
  /** In a forum topic, the topic's opening (`forum_topic_created`) when the user replied to nothing. */
  reply_to_message: z.looseObject({ message_id: z.number(), forum_topic_created: z.unknown().optional() }).optional(),
  /** Shared by the items of an album, each sent as an update of its own. */
  media_group_id: z.string().optional(),
});
type TelegramMessage = z.infer<typeof MessageSchema>;

/** Only update_id is required: an update of a kind the host does not know is still recorded. */
export const UpdateSchema = z.looseObject({ update_id: z.number().int() });

/** The update's kind: the name of its one payload field (`message`, `edited_message`, `callback_query`, ...). */
function updateKind(update: Record<string, unknown>): string {
  return Object.keys(update).find((k) => k !== "update_id") ?? "unknown";
}

function base(update: { update_id: number }, kind: string, m: TelegramMessage) {
  const threadId = m.is_topic_message && m.message_thread_id !== undefined ? m.message_thread_id : null;
  return {
    eventTime: platformTime(m.date * 1000),
    conversationId: String(m.chat.id),
    threadId: threadId === null ? null : String(threadId),
    data: {
      update_id: update.update_id,
      chat_type: m.chat.type,
      chat_title: m.chat.title ?? null,
      message_id: m.message_id,
      // Not the topic's opening, which Telegram names as every topic message's: a runner would read it as a reply.
      reply_to_message_id: m.reply_to_message && !repliesToTopicOpening(m) ? m.reply_to_message.message_id : null,
      ...(m.media_group_id ? { media_group_id: m.media_group_id } : {}),
    },
    sourceEventType: kind,
    threadNumber: threadId,
  };
}

/** A command at the start of a message, as Telegram marks it. */
const LeadingCommandSchema = z.looseObject({ type: z.literal("bot_command"), offset: z.literal(0), length: z.int().positive() });

/** A message's words and their entities: its text, or a file's caption. */
const wordsOf = (m: TelegramMessage) =>
  m.text !== undefined ? { text: m.text, entities: m.entities } : m.caption !== undefined ? { text: m.caption, entities: m.caption_entities } : null;

/**
 * The `@bot` part of a message's leading command (`/help@OtherBot` → "OtherBot", at 5 to 14), or null: a bare
 * command is for every bot.
 */
function commandSuffix(m: TelegramMessage): { bot: string; at: number; end: number } | null {
  const words = wordsOf(m);
  if (words === null) return null;
  const command = (words.entities ?? []).map((e) => LeadingCommandSchema.safeParse(e)).find((e) => e.success)?.data;
  if (!command) return null;
  const named = /^(\/[^@\s]+)@([A-Za-z0-9_]+)$/.exec(words.text.slice(0, command.length));
  return named ? { bot: named[2], at: named[1].length, end: command.length } : null;
}

const SpanSchema = z.looseObject({ offset: z.int().nonnegative(), length: z.int().positive() });

/**
 * The words without the span [at, end): an entity after it moves back, one holding it (the command) shrinks, one
 * cut into is dropped. Offsets count UTF-16 units, as JavaScript's do.
 */
function withoutSpan(words: { text: string; entities?: unknown[] }, at: number, end: number) {
  const gone = end - at;
  const entities = (words.entities ?? []).flatMap((e) => {
    const span = SpanSchema.safeParse(e);
    if (!span.success) return [e];
    const { offset, length } = span.data;
    if (offset + length <= at) return [e];
    if (offset >= end) return [{ ...span.data, offset: offset - gone }];
    return offset <= at && offset + length >= end ? [{ ...span.data, length: length - gone }] : [];
  });
  return { text: words.text.slice(0, at) + words.text.slice(end), entities };
}

/** A mention as Telegram marks it: `@name`, or a user without a username named by a link to them. */
const MentionSchema = z.looseObject({ type: z.enum(["mention", "text_mention"]), offset: z.int().nonnegative(), length: z.int().positive() });

/**
 * The spans of the bot's own mentions (`@username`) among those a message starts with, each with the `,` `:` and
 * spaces after it, to leave out: "@OurBot, hi" reads "hi", "@Ada @OurBot hi" reads "@Ada hi". None when nothing
 * follows those mentions: a bare ping still says the bot was called.
 */
function ownLeadingMentions(words: { text: string; entities?: unknown[] }, username: string): [number, number][] {
  const mentions = (words.entities ?? []).flatMap((e) => {
    const m = MentionSchema.safeParse(e);
    return m.success ? [m.data] : [];
  });
  const own = `@${username.toLowerCase()}`;
  const spans: [number, number][] = [];
  let at = 0;
  for (let m = mentions.find((e) => e.offset === at); m; m = mentions.find((e) => e.offset === at)) {
    const end = m.offset + m.length;
    const next = end + (/^[\s,:]*/.exec(words.text.slice(end))?.[0].length ?? 0);
    if (m.type === "mention" && words.text.slice(m.offset, end).toLowerCase() === own) spans.push([at, next]);
    at = next;
  }
  return at < words.text.length ? spans : [];
}

/**
 * Whether an update's message (or its edit) names a bot, by a command's `@bot`, a leading `@mention`, or a mention of
 * what may be a bot anywhere (whether it addressed this one: ./addressed.ts): the bot's own username is looked up only then.
 */
export function namesABot(given: z.infer<typeof UpdateSchema>): boolean {
  const update = withoutNulls(given);
  const parsed = MessageSchema.safeParse(update.message ?? update.edited_message);
  if (!parsed.success) return false;
  const words = wordsOf(parsed.data);
  const namesOne = (e: unknown) => {
    const m = MentionSchema.safeParse(e).data;
    return m !== undefined && (m.offset === 0 || (m.type === "mention" && mayNameABot((words?.text ?? "").slice(m.offset + 1, m.offset + m.length))));
  };
  return commandSuffix(parsed.data) !== null || (words !== null && (words.entities ?? []).some(namesOne));
}

/** What an update the host does not handle says of its chat (an edit, a button press, the bot's membership): where it is recorded. */
const ChatOfUpdateSchema = z.looseObject({
  chat: z.looseObject({ id: z.number() }).optional(),
  message: z.looseObject({ chat: z.looseObject({ id: z.number() }), message_thread_id: z.number().optional(), is_topic_message: z.boolean().optional() }).optional(),
  message_thread_id: z.number().optional(),
  is_topic_message: z.boolean().optional(),
});

function unhandledInItsChat(update: z.infer<typeof UpdateSchema>, kind: string, key: string): NormalizedEvent {
  const about = ChatOfUpdateSchema.safeParse((update as Record<string, unknown>)[kind]);
  const chat = about.success ? (about.data.chat ?? about.data.message?.chat) : undefined;
  if (!about.success || !chat) return unhandled(key, kind);
  // An update about a message (a button pressed under it) names its topic in that message, as an edit names its own.
  const where = about.data.chat ? about.data : (about.data.message ?? about.data);
  const topic = where.is_topic_message && where.message_thread_id !== undefined ? String(where.message_thread_id) : null;
  return { ...unhandled(key, kind), conversationId: String(chat.id), threadId: topic };
}

/** A live location still shared (a venue is never live): each edit of it is its new position. */
const LivePositionSchema = z.looseObject({ location: z.looseObject({ live_period: z.number() }), venue: z.undefined().optional() });

/**
 * An edit is recorded in its chat, not answered; a message still waiting to be answered takes its new words, read as
 * the message would be (`revises`). An edit that would not be answered as a message (now a command for another bot)
 * changes nothing. A live location's new position is no edit to record (`livePosition`); its last edit, once it is no
 * longer shared, carries no `live_period` and is one.
 */
function editOf(update: z.infer<typeof UpdateSchema>, self: { id?: string; username?: string | null }): NormalizedEvent {
  const recorded = unhandledInItsChat(update, "edited_message", String(update.update_id));
  const editedAt = z.looseObject({ edit_date: z.number() }).safeParse(update.edited_message);
  const [asMessage] = normalizeUpdate({ update_id: update.update_id, message: update.edited_message }, self);
  if (!editedAt.success || asMessage?.eventType !== "message.received") return recorded;
  const live = LivePositionSchema.safeParse(update.edited_message).success ? { livePosition: true as const } : {};
  // A media message's edit may replace its file (Telegram keeps it a media message): the files it has now, by lasting id.
  const own = asMessage.files.filter((f) => f.repliedMessageId === undefined);
  const files = own.length > 0 && own.every((f) => f.uniqueId !== undefined) ? { files: own.map((f) => f.uniqueId!) } : {};
  return { ...recorded, revises: { field: "message_id", id: String(asMessage.data.message_id), edit: { text: asMessage.text, version: editedAt.data.edit_date }, ...live, ...files } };
}

/**
 * `self.id`: the bot's own user id (its token's prefix), so its own arrival in a chat is not welcomed by its agent;
 * `self.username`: its username when known, so a command addressed to another bot is not answered.
 */
export function normalizeUpdate(given: z.infer<typeof UpdateSchema>, self: { id?: string; username?: string | null } = {}): NormalizedEvent[] {
  // A field sent as null counts as absent (README).
  const update = withoutNulls(given);
  const kind = updateKind(update);
  const key = String(update.update_id);
  const parsed = kind === "message" ? MessageSchema.safeParse(update.message) : null;
  if (kind === "edited_message") return [editOf(update, self)];
  if (kind === CALLBACK_QUERY) return [normalizeCallbackQuery(update.update_id, update.callback_query)];
  if (!parsed?.success) return [unhandledInItsChat(update, kind, key)];
  const m = parsed.data;
  const { threadNumber, ...common } = base(update, kind, m);

  if (m.new_chat_members?.length) {
    return m.new_chat_members.map((user) => {
      const joined = `${key}:joined:${user.id}`;
      if (String(user.id) === self.id) return { ...unhandled(joined, "new_chat_members.self"), conversationId: common.conversationId, threadId: common.threadId };
      return {
        ...common,
        key: joined,
        eventType: "group.member_joined" as const,
        sourceEventType: "new_chat_members",
        actor: actorOf(user),
        text: null,
        files: [],
        data: { ...common.data, added_by: m.from ? String(m.from.id) : null },
        // A welcome goes to the chat (and topic), quoting nothing.
        replyTarget: { platform: "telegram" as const, chatId: common.conversationId, messageThreadId: threadNumber, replyToMessageId: null },
      };
    });
  }
  // A command addressed to this bot reaches the runner as a bare one would, `/help args` (`raw_text` keeps what was
  // sent); one addressed to another bot is dropped below. Without the bot's own username (getMe failed) it is
  // answered as sent rather than dropped. The bot's own leading `@mention`s are left out too: "@OurBot, hi" reads "hi".
  const suffix = commandSuffix(m);
  const forUs = suffix !== null && !!self.username && suffix.bot.toLowerCase() === self.username.toLowerCase();
  const words = wordsOf(m);
  const bare = words && forUs ? withoutSpan(words, suffix.at, suffix.end) : words;
  const own = bare && self.username ? ownLeadingMentions(bare, self.username) : [];
  // From the last span back, so each one's offsets still hold.
  const said = bare && own.reduceRight((w, [at, end]) => withoutSpan(w, at, end), bare);
  const text = said === null ? null : withLinkTargets(said.text, said.entities);
  // No words and no file: a location, a contact, a poll... reads as words of its own (./non-text.ts).
  const attached = filesOf(m);
  const other = text === null && attached.length === 0 ? nonTextOf(m) : null;
  const ownFiles = other?.files ?? attached;
  const ignored = (why: string): NormalizedEvent[] => [{ ...unhandled(key, why), conversationId: common.conversationId, threadId: common.threadId }];
  if (text === null && other === null && ownFiles.length === 0) return ignored(kind);
  // Another bot's message (bot-to-bot mode delivers replies to ours) is recorded, not answered: two agents would
  // answer each other forever. A chat speaking through Telegram's placeholder bot is a person.
  if (m.from?.is_bot && !m.sender_chat) return ignored("message.from_bot");
  // A channel's post copied into its discussion group is the channel broadcasting, not someone talking to the bot
  // (and a post the bot itself made there would come back to it).
  if (m.is_automatic_forward) return ignored("message.automatic_forward");
  // Telegram gives a command addressed to another bot to every bot in the group that reads all messages. In a private
  // chat this bot is the only one there to ask: such a command is answered as sent.
  if (suffix !== null && self.username && !forUs && m.chat.type !== "private") return ignored("message.command_for_other_bot");
  const replied = repliedOf(m);
  return [
    {
      ...common,
      key,
      eventType: "message.received",
      actor: m.sender_chat ? chatActorOf(m.sender_chat) : actorOf(m.from),
      text: text ?? other?.text ?? null,
      // Its own files, then those of the message it replies to.
      files: [...ownFiles, ...(replied?.files ?? [])],
      // The text (or caption) as sent; what it replies to, which the bot in a group has mostly never seen.
      data: { ...common.data, raw_text: words?.text ?? null, reply_to: replied?.context ?? null, ...other?.data },
      replyTarget: { platform: "telegram", chatId: common.conversationId, messageThreadId: threadNumber, replyToMessageId: m.message_id },
      addressed: addressedOnTelegram(m, words, self),
    },
  ];
}
