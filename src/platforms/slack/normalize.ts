/**
 * Slack Events API callbacks in the host's terms. Identity: a channel (or DM)
 * is a conversation (`channel`); a thread is `thread_ts`, and a reply goes to
 * the thread its message came from (top-level messages are answered at top level).
 */
import * as z from "zod";
import { artifactTypeOf } from "../../artifacts/policy";
import type { MessageRevision, NormalizedEvent, PlatformFile } from "../types";
import { unhandledEvent as unhandled } from "../unhandled";
import { readableSlackText } from "./inbound-text";
import { addressedOnSlack } from "./addressed";
import { platformTime } from "../../lib/json";
import { absentOr } from "../payload";
import { unreadReply } from "../reply-context";

export const EnvelopeSchema = z.looseObject({
  type: z.string(),
  challenge: z.string().optional(),
  event_id: z.string().optional(),
  event_time: z.number().optional(),
  team_id: z.string().optional(),
  api_app_id: z.string().nullish(),
  /** The installation the event is for: `is_bot` names the app's bot user. */
  authorizations: z.array(z.looseObject({ user_id: z.string().nullish(), is_bot: z.boolean().nullish() })).nullish(),
  event: z.looseObject({ type: z.string() }).optional(),
});
export type SlackEnvelope = z.infer<typeof EnvelopeSchema>;

export const FileSchema = z.looseObject({
  id: z.string(),
  name: absentOr(z.string()),
  mimetype: absentOr(z.string()),
  url_private_download: absentOr(z.string()),
  url_private: absentOr(z.string()),
});

const MessageSchema = z.looseObject({
  type: z.string(),
  subtype: absentOr(z.string()),
  channel: z.string(),
  channel_type: absentOr(z.string()),
  user: absentOr(z.string()),
  bot_id: absentOr(z.string()),
  text: absentOr(z.string()),
  ts: z.string(),
  thread_ts: absentOr(z.string()),
  /** In a thread: who posted its parent (whether a reply answers the bot's message). */
  parent_user_id: absentOr(z.string()),
  team: absentOr(z.string()),
  files: absentOr(z.array(FileSchema)),
  edited: absentOr(z.looseObject({})),
  /** A `thread_broadcast`'s thread parent, as Slack sends it along (./thread-parent.ts reads it). */
  root: z.unknown().optional(),
});

const DeletedSchema = z.looseObject({
  channel: z.string(),
  deleted_ts: z.string(),
  previous_message: absentOr(z.looseObject({ user: absentOr(z.string()), thread_ts: absentOr(z.string()), ts: absentOr(z.string()) })),
});

/** The message a `message_changed` carries as it is now: a person's edit has `edited`; a deleted thread parent turns `tombstone`. */
const ChangedSchema = z.looseObject({ ts: z.string(), subtype: absentOr(z.string()), user: absentOr(z.string()), bot_id: absentOr(z.string()), text: absentOr(z.string()), edited: absentOr(z.looseObject({ ts: absentOr(z.string()) })) });

/** Who posted a message, as far as telling the bot's own posts goes. */
const PosterSchema = z.looseObject({ user: absentOr(z.string()), bot_id: absentOr(z.string()), app_id: absentOr(z.string()), bot_profile: absentOr(z.looseObject({ app_id: absentOr(z.string()) })) });

/**
 * The bot itself, as the envelope names it: its bot user, its app. `postsAsUser`: its token is a user token (a bot
 * stored before bot tokens were required), so its own posts carry that user, not the bot user.
 */
interface Self {
  userIds: string[];
  appId: string | null;
  postsAsUser: boolean;
}
const selfOf = (env: SlackEnvelope, postsAsUser: boolean): Self => ({
  userIds: (env.authorizations ?? []).flatMap((a) => (a.is_bot && a.user_id ? [a.user_id] : [])),
  appId: env.api_app_id ?? null,
  postsAsUser,
});

/**
 * Who posted a message: the bot itself, a person, or another app's bot. Slack marks every post made through an app
 * with its `bot_id` and `app_id`, a person's made with their own user token too: a post of our app by a user other
 * than our bot user is that person's words. Without our bot user in the envelope (or with a user token of our own)
 * such a post cannot be told from ours, and counts as ours: the bot never answers itself.
 */
function posterOf(given: unknown, self: Self): "self" | "person" | "bot" {
  const m = PosterSchema.safeParse(given);
  if (!m.success) return "person";
  const { user, bot_id: botId } = m.data;
  if (user !== undefined && self.userIds.includes(user)) return "self";
  if (botId === undefined) return "person";
  const ours = self.appId !== null && (m.data.app_id ?? m.data.bot_profile?.app_id) === self.appId;
  if (!ours) return "bot";
  return user !== undefined && self.userIds.length > 0 && !self.postsAsUser ? "person" : "self";
}

const JoinedSchema = z.looseObject({ user: z.string(), channel: z.string(), channel_type: absentOr(z.string()), inviter: absentOr(z.string()) });

/** Message subtypes that are a person saying something. */
const USER_MESSAGE_SUBTYPES = new Set([undefined, "file_share", "thread_broadcast", "me_message"]);

/** The thread a message is a reply in: its `thread_ts`, unless it is the thread's parent (`thread_ts` = `ts`). */
const threadOf = (m: { ts?: unknown; thread_ts?: unknown } | null | undefined): string | null => (m && typeof m.thread_ts === "string" && m.thread_ts !== m.ts ? m.thread_ts : null);

const userActor = (user: string | undefined, team?: string) => ({ actor_type: "user", actor_id: user ?? null, actor_name: null, metadata: team ? { team } : {} });

/** Every shared file; one Slack gives no URL for (a Slack Connect file, one hidden by the plan) has an empty ref, and its download says why. */
export function filesOf(files: z.infer<typeof FileSchema>[] = []): PlatformFile[] {
  return files.map((f) => ({ ref: f.url_private_download ?? f.url_private ?? "", name: f.name ?? f.id, mimeType: f.mimetype, artifactType: artifactTypeOf(f.mimetype) as PlatformFile["artifactType"] }));
}

/** The channel an event names: its own (`channel`, `channel_id`), or its item's (a reaction's message, a pin). */
function channelOf(ev: Record<string, unknown>): string | null {
  const item = ev.item && typeof ev.item === "object" ? (ev.item as Record<string, unknown>) : {};
  const named = [ev.channel, ev.channel_id, item.channel].find((c) => typeof c === "string" && c !== "");
  return typeof named === "string" ? named : null;
}

/** `fallbackKey` names an envelope without event_id (a hash of its body); `postsAsUser`: see Self. */
export function normalizeEnvelope(env: SlackEnvelope, fallbackKey: string, postsAsUser = false): NormalizedEvent[] {
  const key = env.event_id ?? fallbackKey;
  const eventTime = env.event_time ? platformTime(env.event_time * 1000) : undefined;
  const ev = env.event;
  if (env.type !== "event_callback" || !ev) return [unhandled(key, env.type, eventTime)];
  const common = { eventTime, data: { team_id: env.team_id ?? null, slack_event_id: env.event_id ?? null } };
  const self = selfOf(env, postsAsUser);

  if (ev.type === "message" || ev.type === "app_mention") {
    const m = MessageSchema.safeParse(ev);
    if (!m.success) return [unhandled(key, ev.type, eventTime)];
    const msg = m.data;
    if (msg.subtype === "message_deleted") return recalled(key, ev, common, self);
    // Slack sends the bot's own posts back, and each chat.update of a streamed answer as a message_changed: neither
    // recorded nor answered (no other platform sends a bot its own messages; a streamed answer would add a record,
    // and a stored payload, per edit). Another bot's message is recorded below.
    const changed = msg.subtype === "message_changed" ? (ev as { message?: unknown }).message : undefined;
    if (posterOf(changed ?? msg, self) === "self") return [];
    // Other bots' messages never start a run.
    // An edit (message_changed) names its thread in the edited message, as a deletion does in previous_message.
    // A thread's parent (a bot's, say, its app_mention sent again as edited) names itself as its thread (thread_ts = ts): it is in the channel.
    const unhandledThread = threadOf(msg) ?? threadOf((ev as { message?: { ts?: unknown; thread_ts?: unknown } }).message);
    const revises = changed === undefined ? undefined : revisionOf(changed, self);
    if (posterOf(msg, self) === "bot" || !USER_MESSAGE_SUBTYPES.has(msg.subtype) || (!msg.text && !msg.files?.length)) return [{ ...unhandled(key, msg.subtype ? `message.${msg.subtype}` : ev.type, eventTime), conversationId: msg.channel, threadId: unhandledThread, ...revising(revises) }];
    // Slack sends app_mention again, marked `edited`, each time a message naming the bot is edited: a typo fixed in an
    // old question (one whose first delivery retention has forgotten) must not ask it again. Edits are not answered
    // (one still waiting to be answered takes the new words instead).
    // In the message's own conversation: a thread's parent edited names itself as its thread (thread_ts = ts), as recorded without.
    if (msg.edited) return [{ ...unhandled(key, `${ev.type}.edited`, eventTime), conversationId: msg.channel, threadId: threadOf(msg), ...revising(revisionOf(msg, self)) }];
    const threadId = msg.thread_ts ?? null;
    // A reply in a thread answers its parent, a message of the channel itself: read at ingress (./thread-parent.ts).
    const parent = threadOf(msg);
    return [
      {
        ...common,
        // Keyed by the message, not the delivery: `message` and `app_mention` for one message are one event.
        key: `msg:${msg.channel}:${msg.ts}`,
        eventType: "message.received",
        sourceEventType: ev.type,
        conversationId: msg.channel,
        threadId,
        actor: userActor(msg.user, msg.team),
        text: msg.text === undefined ? null : readableSlackText(msg.text, self.userIds),
        files: filesOf(msg.files),
        // The text as Slack sent it, markup and all: ids of whom and what it mentions, exactly where.
        data: { ...common.data, ts: msg.ts, channel_type: msg.channel_type ?? null, raw_text: msg.text ?? null, reply_to: parent === null ? null : unreadReply(parent, "not read") },
        replyTarget: { platform: "slack", channel: msg.channel, threadTs: threadId },
        addressed: addressedOnSlack(msg, self),
        ...(parent === null ? {} : { repliesTo: parent, repliedThreadId: null, ...(msg.root === undefined ? {} : { repliedAsSent: msg.root }) }),
        // The bot as the sender of its own answer a thread's parent may be (../delivered-reply.ts); none for a user
        // token's bot, whose answers Slack says its user posted, not the bot user the envelope names.
        ...(parent === null || self.userIds.length === 0 || self.postsAsUser ? {} : { ownUserId: self.userIds[0] }),
      },
    ];
  }
  if (ev.type === "member_joined_channel") {
    const j = JoinedSchema.safeParse(ev);
    if (!j.success) return [unhandled(key, ev.type, eventTime)];
    // The bot's own join; a person an installation names (a user token's, `is_bot: false`) joining is a join.
    if (self.userIds.includes(j.data.user)) return [{ ...unhandled(key, "member_joined_channel.self", eventTime), conversationId: j.data.channel }];
    return [
      {
        ...common,
        key,
        eventType: "group.member_joined",
        sourceEventType: ev.type,
        conversationId: j.data.channel,
        threadId: null,
        actor: userActor(j.data.user),
        text: null,
        files: [],
        data: { ...common.data, inviter: j.data.inviter ?? null, channel_type: j.data.channel_type ?? null },
        // A welcome goes to the channel itself.
        replyTarget: { platform: "slack", channel: j.data.channel, threadTs: null },
      },
    ];
  }
  return [{ ...unhandled(key, ev.type, eventTime), conversationId: channelOf(ev) }];
}

function recalled(key: string, ev: unknown, common: { eventTime?: string; data: Record<string, unknown> }, self: Self): NormalizedEvent[] {
  const d = DeletedSchema.safeParse(ev);
  if (!d.success) return [unhandled(key, "message.message_deleted", common.eventTime)];
  const prev = d.data.previous_message;
  const threadId = threadOf(prev);
  // The bot's own message deleted withdraws no one's words (nothing of the bot's waits to be answered): recorded in
  // its channel, not a recall for agents, whose actor would be the bot itself.
  // Its delivery record is marked deleted all the same (a later reply in its thread reads Slack, which says so).
  if (prev && posterOf(prev, self) === "self") return [{ ...unhandled(key, "message.message_deleted.self", common.eventTime), conversationId: d.data.channel, threadId, deletesOwnMessage: d.data.deleted_ts }];
  return [
    {
      ...common,
      key,
      eventType: "message.recalled",
      sourceEventType: "message.message_deleted",
      conversationId: d.data.channel,
      threadId,
      actor: prev?.user ? userActor(prev.user) : null,
      text: null,
      files: [],
      data: { ...common.data, message_id: d.data.deleted_ts },
      replyTarget: null,
      revises: { field: "ts", id: d.data.deleted_ts },
    },
  ];
}

/**
 * An edit or a tombstone names the message it revises in its record too (`data.message_id`, as a recall's does): a
 * message the host never recorded has no row for it to mark, and a parent read for an earlier reply is then read anew
 * (../earlier-read-reply.ts).
 */
const revising = (revises: MessageRevision | undefined) => (revises === undefined ? {} : { revises, data: { message_id: revises.id } });

/** What an edited message (a `message_changed`'s, or an `app_mention` marked edited) changes of the message it was: only a person's edit counts. */
function revisionOf(given: unknown, self: Self): MessageRevision | undefined {
  const m = ChangedSchema.safeParse(given);
  if (!m.success) return undefined;
  // A thread parent deleted while it has replies stays as a tombstone: recalled all the same.
  if (m.data.subtype === "tombstone") return { field: "ts", id: m.data.ts };
  // Not a person's edit: our own answer streamed by chat.update, another bot's, a link preview added.
  if (posterOf(m.data, self) !== "person" || !m.data.user || !m.data.edited?.ts) return undefined;
  return { field: "ts", id: m.data.ts, edit: { text: m.data.text === undefined ? null : readableSlackText(m.data.text, self.userIds), version: Number(m.data.edited.ts) } };
}
