/**
 * The common shape of a chat platform integration: how its webhook is
 * verified and normalised, how files are fetched, and how the host replies.
 * One module per platform implements it (src/platforms/{telegram,slack,lark,discord}).
 */
import type { z } from "zod";
import type { InputAttachmentSource } from "../artifacts/input";
import type { EventType } from "../protocol/common";
import type { RecordedReply, ReplyContext } from "./reply-context";
import type { HandedOver, SiblingDirectory } from "./siblings";

export const PLATFORMS = ["telegram", "slack", "lark", "discord"] as const;
export type PlatformName = (typeof PLATFORMS)[number];
export const isPlatform = (p: string): p is PlatformName => (PLATFORMS as readonly string[]).includes(p);

/** How an answer's text is shown where the host formats it (Telegram, Slack, Lark): its Markdown rendered, or the text as it is. */
export const TEXT_FORMATS = ["markdown", "plain"] as const;
export type TextFormat = (typeof TEXT_FORMATS)[number];

/** A registered bot with its parsed credentials and its effective API origin. */
export interface Bot<C = Record<string, string>> {
  botId: string;
  platform: PlatformName;
  name: string | null;
  workspaceId: string | null;
  /** The operator's override, else the platform's own API origin. */
  apiBaseUrl: string;
  credentials: C;
  /** False while the operator pauses the bot: its events are recorded and acknowledged, and start nothing. */
  enabled: boolean;
  /** When this registration of its id was made (its row's created_at, which a PUT keeps): a bot deleted and registered again under the id is another. */
  registeredAt: number;
}

/** A webhook request as an adapter sees it: the raw body is what signatures cover. */
export interface WebhookRequest {
  headers: Headers;
  rawBody: string;
  /** Milliseconds since the epoch, for timestamp windows. */
  now: number;
  /** Bounds a platform call made to read the request (Telegram's getMe). */
  apiTimeoutMs: number;
  /** Which installation of its platform app the bot is, as its row keeps it (Slack's team and app: ./slack/installation.ts). */
  installation: WebhookInstallation;
}

/**
 * What the platform said the bot is (its adapter's own shape; null until first learned, or since its credentials
 * changed; read only by an adapter that checks it), and how to keep what it says when first asked (best effort: never
 * throws).
 */
export interface WebhookInstallation {
  pinned(): Promise<Record<string, unknown> | null>;
  pin(installation: Record<string, unknown>): Promise<void>;
  /**
   * When the platform refused the bot's current credentials, asked which installation they are (ms since the epoch),
   * by a request or the cron; null when it has not. Kept until they change: the cron does not ask such a bot again,
   * a request not for a while.
   */
  refusedAt(): Promise<number | null>;
  /** Keeps that the platform refused the current credentials at `at`, as the cron does (best effort: never throws). */
  keepRefused(at: number): Promise<void>;
}

/** A file a platform message carries, before the host downloads it. */
export interface PlatformFile {
  /** The platform's handle (Telegram file_id, Slack URL, Lark file_key, Discord URL). */
  ref: string;
  name?: string | null;
  mimeType?: string | null;
  artifactType: "image" | "audio" | "video" | "file";
  /** Set on a file of the message the event replies to (`data.reply_to`), not of its own: that message's id. */
  repliedMessageId?: string;
  /**
   * Fetched from the platform, never taken as the files stored for the message recorded here under that id: another
   * chat's message (Telegram `external_reply`), or one edited since it was received (its photo may have been replaced).
   */
  fetchAnew?: true;
  /** The artifact it was stored as when the bot received its message (./stored-reply.ts): re-used, not downloaded. */
  artifactId?: string;
  /**
   * The file's own lasting id where the platform gives one (Telegram's `file_unique_id`), kept in its artifact's
   * metadata (PLATFORM_FILE_KEY): an edit of its message naming others has replaced it (MessageRevision.files).
   */
  uniqueId?: string;
}

/** Where and how a reply goes, fixed at ingress and carried by the run job. May hold short-lived secrets (a Discord interaction token). */
export type DeliveryTarget =
  | { platform: "telegram"; chatId: string; messageThreadId: number | null; replyToMessageId: number | null }
  /**
   * `responseUrl`: a slash command's, shortcut's or press's `response_url` (it posts in the chat for 30 minutes, five
   * times, with no token): where the answer goes when Slack says the bot may not post in the channel. A credential.
   * `ephemeral`: the answer is the user's alone (a press on an ephemeral message), `userId` that user (./slack/ephemeral.ts).
   */
  | { platform: "slack"; channel: string; threadTs: string | null; responseUrl?: string; ephemeral?: boolean; userId?: string }
  /**
   * Without a message to reply to (a welcome), the reply is a new message in the chat. `threadRootId`: the root of the
   * topic thread the message is in, replied to in the thread should the message be recalled first.
   */
  | { platform: "lark"; chatId: string; replyToMessageId: string | null; replyInThread: boolean; threadRootId?: string | null }
  /**
   * `followupLimit`: the follow-up messages Discord takes for the interaction, when it limits them (an app installed only
   * to the user). `ephemeral`: the answer is the user's alone (a press on an ephemeral message). `userId`: who asked.
   */
  | { platform: "discord"; channelId: string | null; interactionId: string; interactionToken: string; followupLimit?: number; ephemeral?: boolean; userId?: string };

/** What the run job carries so its conversation's object can deliver the reply. */
export interface PlatformDelivery {
  botId: string;
  /** The registration of the bot the event came in through (Bot.registeredAt): the reply goes out under it only. Absent in jobs stored before it was kept. */
  registeredAt?: number;
  target: DeliveryTarget;
}

/**
 * A platform event in the host's terms. `eventType` null means the host does
 * not handle it: it is recorded and acknowledged, nothing runs.
 */
export interface NormalizedEvent {
  /** The platform's own event id, unique per bot; the dedupe key is `{platform}:{bot_id}:{key}`. */
  key: string;
  eventType: EventType | null;
  sourceEventType: string;
  eventTime?: string;
  conversationId: string | null;
  threadId: string | null;
  actor: { actor_type: string; actor_id: string | null; actor_name: string | null; metadata: Record<string, unknown> } | null;
  text: string | null;
  files: PlatformFile[];
  data: Record<string, unknown>;
  replyTarget: DeliveryTarget | null;
  /**
   * Whether a chat message was addressed to the bot: it mentions the bot, replies to the bot's message, is a command for
   * it, or was sent in a private chat (one adapter function per platform decides it). False only for a group's message
   * that did none of these, which an agent answering only what addresses it leaves unanswered (trigger_policy). Absent
   * for what addresses the app by its nature (a command, a press) and for other events: never left so.
   */
  addressed?: boolean;
  /** An earlier message of the chat this event recalls or edits: one still waiting to be answered is changed too (revise-waiting.ts). */
  revises?: MessageRevision;
  /**
   * The bot's own message (its id, as its delivery record names it) the platform says was deleted (a Slack
   * message_deleted of its post): a reply to it no longer takes it from the host's record (../stores/deleted-answer.ts).
   * No one's words are withdrawn: what else names it (a message shortcut's copy of it) is left as it is.
   */
  deletesOwnMessage?: string;
  /**
   * The message this one replies to, when the platform names it by id only (Lark's `parent_id`): read at ingress by
   * the adapter's `readReplied`, in the time the event's files have.
   */
  repliesTo?: string;
  /**
   * The thread the message `repliesTo` names is recorded in, when not the event's own: a Slack thread's parent is a
   * message of the channel itself (null). Its files stored then are that conversation's, so it is read for them.
   */
  repliedThreadId?: string | null;
  /**
   * The message `repliesTo` names as the payload itself carried it, in the platform's own shape (a Slack
   * `thread_broadcast`'s `root`): the adapter's `readReplied` takes it rather than asking the platform.
   */
  repliedAsSent?: unknown;
  /** What it says is still to be read from the platform (a Lark merged forward's messages): PlatformAdapter.readContent. */
  unread?: boolean;
  /**
   * The bot's own user id as the payload names it, where its credentials do not (Slack's envelope `authorizations`):
   * the sender of its own answer replied to, taken from the host's record (PlatformAdapter.ownActor).
   */
  ownUserId?: string;
  /** The event says its chat became another (Telegram's service messages of a group upgraded to a supergroup). */
  chatMove?: ChatMove;
  /**
   * Set by ingress when the chat continues another chat's conversation (`conversationId` is then that one's): the chat
   * the event happened in, which scopes its message ids (a supergroup numbers its messages anew). src/platforms/moved-chats.ts.
   */
  chatId?: string;
}

/** A chat that now lives under another id: `from` the old chat's (a Telegram group), `to` the new one's (its supergroup). */
export interface ChatMove {
  from: string;
  to: string;
}

/**
 * A recall or an edit, naming its message as the message's `message.received` data names it (Slack `ts`, Lark and
 * Telegram `message_id`). `edit` is absent for a recall: the words now (null: none left, its files stay) and the
 * edit's time, so a late older edit never undoes a newer one.
 */
export interface MessageRevision {
  field: "ts" | "message_id";
  id: string;
  /** The chat the message is in, when the conversation is another chat's (NormalizedEvent.chatId). */
  chatId?: string;
  edit?: { text: string | null; version: number };
  /**
   * An edit's: the lasting ids (PlatformFile.uniqueId) of the message's own files now, where the platform gives them
   * (Telegram): a file stored for it under another id was replaced (its photo swapped), and goes as a recalled one's do.
   */
  files?: string[];
  /**
   * A live location's new position (Telegram sends one every few seconds, for hours): no event of its own (no EventLog
   * row, no raw payload), and it reaches the message at most once per LIVE_POSITION_SECONDS of its edits (./revise-waiting.ts).
   */
  livePosition?: true;
}

/** The outcome of reading a verified webhook. */
export type Inbound =
  /** A handshake (URL challenge, PING) answered as given; nothing is recorded. */
  | { kind: "handshake"; body: unknown }
  | {
      kind: "events";
      raw: unknown;
      events: NormalizedEvent[];
      /**
       * The platform never sends this request again, whatever the answer (a Discord interaction; a Slack button press,
       * shortcut or slash command; a Lark card callback): a raw payload not stored cannot fail it (./raw-payload.ts).
       */
      sentOnce?: true;
    };

/** What one recorded event became, for the platform's acknowledgement. */
export interface Recorded {
  event: NormalizedEvent;
  disposition: string;
  runId: string | null;
  /** Why a `rejected` event was (its metadata.rejection's reason). */
  rejection?: string;
}

/** A failed platform API call, classified for the retry loop. */
export interface ApiFailure {
  /** `rate_limited` waits retryAfterMs; `transient` backs off; `permanent` gives up at once. */
  kind: "rate_limited" | "transient" | "permanent";
  status: number | null;
  code: string;
  message: string;
  retryAfterMs?: number;
  /** The call may have taken effect all the same (no answer came, or the platform says so): a send is not repeated. */
  maybeApplied?: boolean;
  /** The chat now lives under this id (a Telegram group upgraded to a supergroup): the call belongs there. */
  movedToChatId?: string;
  /**
   * Refused for the formatting the messenger gave the text (Telegram could not parse its HTML, Lark could not build its
   * Markdown card): the messenger makes the next attempt at the same text as plain text, so it is made at once, even
   * past the attempt bound.
   */
  refusedFormatting?: boolean;
  /**
   * The reply goes on another way that cannot take this call (a Slack command's answer by its response_url, which takes
   * no draft to edit: the text goes whole at the end): recorded as failed, never as given up.
   */
  continuesAs?: string;
  /**
   * The place the reply goes refuses the bot for good (the bot was removed from the chat, the chat or channel is gone or
   * archived): no later call of this reply could be made there, so none is (the next run's reply tries again).
   */
  placeGone?: boolean;
}
export type ApiResult<T> = { ok: true; value: T } | { ok: false; failure: ApiFailure };

/** A file of an answer (an artifact the run may read), on its way to a platform. */
export interface OutgoingFile {
  name: string;
  mimeType: string;
  /** Images are shown as pictures where the platform has its own way to send them; the rest go as documents. */
  kind: "image" | "file";
  /** Exactly the bytes `open` streams. */
  size: number;
  /** The bytes, streamed anew for each attempt (a retry, a fallback): a file is never held whole in memory. */
  open(): Promise<ReadableStream<Uint8Array>>;
}

/** Sends and edits messages in one reply target. */
export interface Messenger {
  /** A new message; `editable` when it will be edited as a stream grows (Lark sends a card then). Answers its id. */
  send(text: string, opts: { editable: boolean }): Promise<ApiResult<string>>;
  edit(messageId: string, text: string): Promise<ApiResult<void>>;
  /** A file as a message of its own in the same place. Answers its id. */
  sendFile(file: OutgoingFile): Promise<ApiResult<string>>;
  /**
   * How many more messages the reply may post, when the way it goes takes only so many (a Slack command's answer by
   * its response_url: five in all); undefined where nothing bounds them.
   */
  postsLeft?(): number | undefined;
  /**
   * The chat a message it posted is in, where that may not be the target's: a Telegram group upgraded mid-reply, whose
   * later posts went to the supergroup. Unset, or undefined for an id it did not post: the target's chat.
   */
  chatOf?(messageId: string): string | undefined;
}

/** What the platform's surface can do, for ctx.delivery and the delivery session. */
export interface Surface {
  canEdit: boolean;
  /** Characters (UTF-16 code units) per message; longer replies are split. */
  maxMessageSize: number;
  /** What one code unit of a reply takes of maxMessageSize as sent, when the messenger escapes it (Slack's `&` is `&amp;`); one otherwise. */
  sentUnits?: (charCode: number) => number;
  /** The largest file (bytes) a bot may upload here; larger ones are not sent, and the delivery record says why. */
  maxFileBytes: number;
  capabilities: Record<string, unknown>;
  /** A repeated send is recognised and not posted twice (Lark's `uuid`): a send that timed out may be retried. */
  idempotentSends?: boolean;
  /**
   * Where the host renders Markdown and the platform shows no tables: the monospaced characters a line of a table's
   * aligned block may take (a wider table goes as a record per row). Unset where tables render (Lark).
   */
  tableColumns?: number;
  /** The platform shows a placeholder until the first answer (Discord's deferred "thinking…"): every run must answer it, even a cancelled one. */
  awaitsAnswer?: boolean;
}

export interface PlatformAdapter<C extends Record<string, string> = Record<string, string>> {
  name: PlatformName;
  /** Credentials as stored and used. */
  credentials: z.ZodType<C>;
  /** Credentials an operator sends now, when stricter than those stored before (a bot keeps working with its own). */
  newCredentials?: z.ZodType<C>;
  defaultApiBaseUrl: string;
  surface: Surface;
  /** How soon the platform wants its webhook answered (Slack, Lark, Discord: 3 s); unset when it waits long. */
  ackDeadlineMs?: number;
  /** Verify the request (throwing a 401 HostError, failing closed) and normalise it. */
  receive(bot: Bot<C>, req: WebhookRequest): Promise<Inbound>;
  /** The secret every installation of the platform's app shares (Slack's signing secret): how its siblings are found. */
  appSecret?(credentials: C): string;
  /** The key an installation `WebhookInstallation.pin` kept is looked up by ("team:T1"); null when it names none. */
  installationKey?(installation: Record<string, unknown>): string | null;
  /** A kept installation as the bot's admin view shows it (nothing secret); null when it is not the adapter's shape. */
  installationShown?(installation: Record<string, unknown>): Record<string, unknown> | null;
  /**
   * The bot registered here that a request `bot` refused (`refusal`, as receive threw it) is for, when it is another
   * installation's of the same app (./siblings.ts): the request is then read by that bot, as at its own address. Null:
   * the refusal stands. Throws a HostError when that cannot be told now.
   */
  siblingFor?(bot: Bot<C>, refusal: unknown, req: WebhookRequest, siblings: SiblingDirectory): Promise<HandedOver | null>;
  /** The HTTP answer once the events are recorded (platforms that expect a body, e.g. Discord's deferral). */
  acknowledge(recorded: Recorded[]): unknown;
  /** What the acknowledgement cannot carry, done after it (Slack's private notice by a press's response_url). Never rejects. */
  afterAcknowledge?(bot: Bot<C>, recorded: Recorded[], timeoutMs: number): Promise<void> | null;
  /**
   * An `unread` event as its runner gets it, read from the platform's API within `timeoutMs` (what is left of the
   * platform's acknowledgement deadline). Never rejects: what cannot be read in time is said so in the event's text.
   */
  readContent?(bot: Bot<C>, event: NormalizedEvent, timeoutMs: number): Promise<NormalizedEvent>;
  /**
   * An `unread` event left unread (`why`), said as readContent says what it could not read; the words any text it
   * reads opens with, which an agent's prefix could match; and whether a message was recorded so, for whatever reason
   * (./unaddressed-read.ts).
   */
  contentNotRead?: { opening: string; event(event: NormalizedEvent, why: string): NormalizedEvent; wasLeft(recorded: RecordedReply): boolean };
  /**
   * The message `event.repliesTo` names, read within `timeoutMs`: its context for `data.reply_to`, its files (each
   * with `repliedMessageId`), and whether this bot sent it (a reply to it addresses the bot: `addressed`). Throws a 4xx
   * HostError when it cannot be read (the event runs without it).
   */
  readReplied?(bot: Bot<C>, event: NormalizedEvent, timeoutMs: number): Promise<{ context: ReplyContext; files: PlatformFile[]; byThisBot: boolean }>;
  /**
   * The context `readReplied` gives, read from the message as the host recorded it when the bot received it (its files
   * are those stored then): nothing asked of the platform. A message received is never this bot's own.
   */
  recordedReplied?(recorded: RecordedReply): ReplyContext;
  /** This bot as the sender of a replied message reads (`reply_to.actor`), for its own answer read from the host's record (./delivered-reply.ts). */
  ownActor?(bot: Bot<C>, event: NormalizedEvent): ReplyContext["actor"];
  /**
   * Whether a reply addresses the bot is told without reading the message it replies to (Slack names a thread parent's
   * poster, `parent_user_id`): that message is not read from the platform for a reply its agent leaves unanswered.
   */
  addressedWithoutReplied?: true;
  /** How the host fetches a file (URL and headers; may call the platform's API). */
  download(bot: Bot<C>, file: PlatformFile, event: NormalizedEvent, timeoutMs: number): Promise<InputAttachmentSource>;
  /** Point the platform at the webhook, where its API allows (Telegram's setWebhook). */
  registerWebhook?(bot: Bot<C>, url: string, timeoutMs: number): Promise<ApiResult<unknown>>;
  /** Stop the platform calling the webhook, where its API allows (Telegram's deleteWebhook). */
  removeWebhook?(bot: Bot<C>, timeoutMs: number): Promise<ApiResult<unknown>>;
  /** The raw payload as stored in R2: fields that carry secrets removed. */
  redactRaw(raw: unknown): unknown;
  /**
   * `scope` names the one reply (the run) the messenger sends for: sends of different runs are never taken for repeats.
   * `format` is how its text is shown where the host formats it (Telegram, Slack, Lark; markdown unless said).
   * `onChatMoved`: told when the platform answers that the chat moved (a Telegram group upgraded), before the call is
   * made again there.
   */
  messenger(bot: Bot<C>, target: DeliveryTarget, timeoutMs: number, opts?: { scope?: string; format?: TextFormat; onChatMoved?: (move: ChatMove) => Promise<void> }): Messenger;
  /** What one reply target cannot do of the surface (a Slack answer only one user sees takes no edits); unset: the whole surface. */
  surfaceAt?(target: DeliveryTarget): Partial<Surface>;
  /**
   * Whether a chat may continue another chat's conversation (Telegram: a supergroup, what a group is upgraded to): only
   * such a chat's events are looked up among the bot's chat moves (src/platforms/moved-chats.ts). Unset: none may.
   */
  mayContinueChat?(chatId: string): boolean;
  /** ctx.delivery.reply_target: where the reply goes, without secrets. */
  replyTargetView(target: DeliveryTarget): Record<string, unknown>;
}
