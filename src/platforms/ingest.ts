/**
 * Verified platform events into the host: the raw payload to R2 (alongside the recording), files
 * downloaded as input artifacts, each event recorded (deduplicated forever by
 * `{platform}:{bot_id}:{platform event id}`, the EventLog's unique event_id)
 * and handed to its conversation's object. Events the host does not handle
 * are recorded as `platform.unhandled` and acknowledged like any other; so are a paused bot's, as `bot_disabled`.
 */
import { dbOf } from "../db/connect";
import type { Env } from "../env";
import { acceptEvent, type CanonicalEvent } from "../ingress/accept";
import { eventLogStore } from "../stores/event-log";
import { noteUnboundEvent } from "../stores/bot-notes";
import { unboundReason } from "../stores/unbound-reason";
import { loggedError } from "../lib/describe-error";
import { loggedId } from "../lib/log-text";
import { storableText } from "../lib/text";
import { announceAlbumItem } from "./album-notice";
import { BOT_DISABLED, recordOnly, recordPaused, UNHANDLED_EVENT_TYPE } from "./record-only";
import { messageRefOf, scopedMessageRef } from "./message-ref";
import { markOwnMessageDeleted } from "../stores/deleted-answer";
import { inItsConversation } from "./moved-chats";
import { withUsableIds } from "./usable-ids";
import { audienceMetadata } from "./audience";
import { reviseMessage } from "./revise-waiting";
import { RawCopy, rawRefOf, storeRaw } from "./raw-payload";
import { leftUnread } from "./unaddressed-read";
import { withRepliedMessage, withStoredRepliedFiles } from "./replied";
import { withOwnAnswerReplied } from "./delivered-reply";
import { fileSources } from "./file-sources";
import { MEMBER_JOINED, recordJoinedWith, withMembers } from "./joined-together";
import { discardOwnFiles, ownFilesAlongside, readWithOwnFiles, type OwnFiles } from "./own-files-alongside";
import type { Bot, NormalizedEvent, PlatformAdapter, Recorded } from "./types";

/** Time kept back from a platform's acknowledgement deadline for recording the event and answering. */
const ACK_MARGIN_MS = 1_000;

// The key as a text column holds it (a NUL would cut the stored id short when read): the operator can read the event back.
export const dedupeId = (bot: Bot, key: string) => `${bot.platform}:${bot.botId}:${storableText(key)}`;

/** When a platform that wants its answer within seconds must be done with (ms since the epoch); undefined when it waits long. */
const ackDeadlineAt = (deps: IngestDeps) => (deps.adapter.ackDeadlineMs === undefined ? undefined : deps.receivedAt + deps.adapter.ackDeadlineMs - ACK_MARGIN_MS);
const timeLeft = (deps: IngestDeps) => Math.min(deps.apiTimeoutMs, (ackDeadlineAt(deps) ?? Infinity) - Date.now());

interface IngestDeps {
  env: Env;
  adapter: PlatformAdapter;
  bot: Bot;
  publicBaseUrl: string;
  apiTimeoutMs: number;
  /** When the platform's request arrived: its acknowledgement deadline runs from then, whatever reading it took (Lark's own open_id). */
  receivedAt: number;
  /** Set by ingestEvents on a request sent only once: whether its events may name its raw payload (RawCopy.held). */
  rawRefHeld?: () => Promise<boolean>;
}

export async function ingestEvents(deps: IngestDeps, { raw, events, sentOnce }: { raw: unknown; events: NormalizedEvent[]; sentOnce?: true }): Promise<Recorded[]> {
  if (events.length === 0) return [];
  // A live location's new position (one every few seconds, for hours) is no event of its own: neither its payload nor
  // a record is kept, only the words it may give its message (revise-waiting.ts).
  const rawRef = events.every((e) => e.revises?.livePosition) ? null : await rawRefOf(deps.bot, events[0].key);
  // Stored while the events are recorded (an R2 write costs about what the recording does), their rows naming it
  // already. The answer waits for both to settle: a payload not stored fails the request once the recording is done,
  // and the platform's redelivery stores it (its events then duplicates); a recording that failed is the error given.
  // R2 not answering by the platform's deadline counts as not stored: the answer never waits past it for the payload.
  const copy = rawRef === null ? null : new RawCopy(deps.env, deps.bot, rawRef, storeRaw(deps.env, deps.adapter, rawRef, raw, ackDeadlineAt(deps)));
  // Nothing would store it later, and failing the request would lose the event's answer (Discord's deferral, which the
  // run's answer edits): the copy is only an operator's, so the events go on without it, their runs not handed its name.
  const held = sentOnce && copy ? () => copy.held() : undefined;
  const [recording] = await Promise.allSettled([recordInOrder(held ? { ...deps, rawRefHeld: held } : deps, events, rawRef), copy?.failure]);
  if (recording.status === "rejected") throw recording.reason;
  const failed = await copy?.failure;
  if (failed) {
    if (!held) throw failed.cause;
    // Rows recorded without a run handed over (an unhandled event, a paused bot's) are cleared of it too.
    await held();
  }
  return recording.value;
}

async function recordInOrder(deps: IngestDeps, events: NormalizedEvent[], rawRef: string | null): Promise<Recorded[]> {
  const recorded: Recorded[] = [];
  const joins = onceEach(events.filter((e) => e.eventType === MEMBER_JOINED));
  // Members who joined one chat together (a payload names but one) are recorded together (./joined-together.ts).
  const together = joins.length > 1 && joins.every((e) => e.conversationId === joins[0].conversationId && e.threadId === joins[0].threadId);
  // In order: a payload's events keep the platform's order.
  for (const event of events) {
    if (together && event.eventType === MEMBER_JOINED) {
      if (event === joins[0]) recorded.push(...(await recordJoins(deps, joins, rawRef)));
    } else if (event.eventType !== MEMBER_JOINED || joins.includes(event)) recorded.push(await ingestOne(deps, await placed(deps, event), rawRef));
  }
  return recorded;
}

/** A member the payload names twice joined once: listed and counted once, as its one event (the first of them) is recorded. */
function onceEach(joins: NormalizedEvent[]): NormalizedEvent[] {
  const keys = new Set<string>();
  return joins.filter((e) => !keys.has(e.key) && keys.add(e.key));
}

const placed = (deps: IngestDeps, event: NormalizedEvent) => inItsConversation(dbOf(deps.env), deps.adapter, deps.bot, withUsableIds(event));

/** The first member's event as any join, naming them all; the others in one write as it ended up. */
async function recordJoins(deps: IngestDeps, joins: NormalizedEvent[], rawRef: string | null): Promise<Recorded[]> {
  const first = await placed(deps, withMembers(joins[0], joins));
  const recorded = await ingestOne(deps, first, rawRef);
  const others = joins.slice(1);
  // Their chat's ids are the first one's: unusable for it (recorded platform.unhandled), they are each recorded so too.
  if (first.eventType !== MEMBER_JOINED || first.conversationId === null || rawRef === null) {
    const each = [recorded];
    for (const event of others) each.push(await ingestOne(deps, await placed(deps, event), rawRef));
    return each;
  }
  const ids = others.map((e) => dedupeId(deps.bot, e.key));
  return [recorded, ...(await recordJoinedWith(deps.env, deps.bot, first, dedupeId(deps.bot, first.key), others, ids))];
}

async function ingestOne(deps: IngestDeps, event: NormalizedEvent, rawRef: string | null): Promise<Recorded> {
  const recorded = rawRef === null ? { event, disposition: "unhandled", runId: null } : await recordOne(deps, event, rawRef);
  // After its own record: a redelivery (the first attempt failed here) does it again. A paused bot's too: a message
  // from before the pause takes its edit or recall, which starts nothing.
  if (event.revises && event.conversationId !== null) await reviseMessage(deps.env, deps.bot, event.conversationId, dedupeId(deps.bot, event.key), event.revises, ackDeadlineAt(deps));
  else if (event.deletesOwnMessage !== undefined && event.conversationId !== null) {
    const { botId, registeredAt } = deps.bot;
    await markOwnMessageDeleted(dbOf(deps.env), { botId, registeredAt, conversationId: event.conversationId, messageRef: scopedMessageRef(event.chatId, event.deletesOwnMessage), eventId: dedupeId(deps.bot, event.key) });
  }
  return recorded;
}

async function recordOne(deps: IngestDeps, given: NormalizedEvent, rawRef: string): Promise<Recorded> {
  const { env, bot } = deps;
  const eventId = dedupeId(bot, given.key);
  // A paused bot calls no API: its event is recorded as it came. A reply's own files are fetched while what it
  // replies to is read (./own-files-alongside.ts).
  const alongside = { env, adapter: deps.adapter, bot, timeLeft: () => timeLeft(deps), deadlineAt: ackDeadlineAt(deps) };
  const [{ event, unavailable }, own] = bot.enabled ? await readWithOwnFiles(env, withNamedMessages(deps, given, eventId), ownFilesAlongside(alongside, given, eventId)) : [{ event: given, unavailable: null }, null];
  if (event.eventType === null || event.conversationId === null) {
    await recordOnly(env, bot, event, { eventId, rawRef, eventType: UNHANDLED_EVENT_TYPE, disposition: "unhandled", metadata: { source_event_type: event.sourceEventType } });
    return { event, disposition: "unhandled", runId: null };
  }
  // Paused: acknowledged as the platform needs, recorded for the operator; nothing runs and nothing is fetched.
  if (!bot.enabled) {
    await recordPaused(env, bot, event, { eventId, rawRef, eventType: event.eventType });
    return { event, disposition: BOT_DISABLED, runId: null };
  }
  const canonical: CanonicalEvent = {
    event_id: eventId,
    event_type: event.eventType,
    event_time: event.eventTime,
    source: bot.platform,
    source_event_type: event.sourceEventType,
    raw_ref: rawRef,
    ...(deps.rawRefHeld ? { rawRefHeld: deps.rawRefHeld } : {}),
    workspace_id: bot.workspaceId,
    bot_id: bot.botId,
    conversation_id: event.conversationId,
    thread_id: event.threadId,
    // What a text column cannot hold as sent (a NUL, half a surrogate pair) is replaced before anyone sees it: the
    // runner, the transcript and the event record then all give back the same text.
    actor: event.actor ? { ...event.actor, actor_name: event.actor.actor_name === null ? null : storableText(event.actor.actor_name) } : { actor_type: "unknown", metadata: {} },
    input: { text: event.text === null ? null : storableText(event.text), contents: [], attachments: [] },
    data: event.data,
    // Marked when only one user sees it: runs answering others never read it (history, events).
    metadata: audienceMetadata(event.replyTarget),
    delivery: event.replyTarget ? { botId: bot.botId, registeredAt: bot.registeredAt, target: event.replyTarget } : undefined,
    message_ref: messageRefOf(bot.platform, event),
    ...(event.addressed === false ? { addressed: false } : {}),
    ...(event.chatId !== undefined ? { chat_id: event.chatId } : {}),
  };
  const accepted = await acceptWithFiles(deps, canonical, event, unavailable, own);
  if (accepted.disposition === "unbound") await noteUnbound(env, bot, { ...canonical, event_id: accepted.event_id });
  return { event, disposition: accepted.disposition, runId: accepted.run_id, ...(accepted.rejection ? { rejection: accepted.rejection } : {}) };
}

/**
 * What the event names but does not carry, read from the platform before its files are fetched, from the same time
 * left: its own content first (a Lark merged forward's messages), then the message it replies to (Lark's `parent_id`),
 * whose files join the event's (`unavailable`: why it was not read, said as a file left out is), or that message as
 * recorded when the bot received it. A redelivery reads nothing again: acceptEvent answers it as a duplicate.
 */
async function withNamedMessages(deps: IngestDeps, event: NormalizedEvent, eventId: string): Promise<{ event: NormalizedEvent; unavailable: string | null }> {
  const { adapter, bot } = deps;
  const db = dbOf(deps.env);
  // The replied message given whole (Telegram): the bot's own answer is taken as recorded, another's files may be had
  // as stored rather than downloaded.
  if (!event.unread && event.repliesTo === undefined) return { event: (await withOwnAnswerReplied(db, bot, event)) ?? (await withStoredRepliedFiles(db, bot, event)), unavailable: null };
  if (await eventLogStore(db).get(eventId)) return { event, unavailable: null };
  // Nothing is read for what will be recorded unanswered whatever it says (./unaddressed-read.ts).
  const read = event.unread && adapter.readContent ? ((await leftUnread(db, adapter, bot, event)) ?? (await adapter.readContent(bot, event, timeLeft(deps)))) : event;
  return withRepliedMessage(adapter, bot, db, read, () => timeLeft(deps));
}

/**
 * An event no agent took, noted on its bot with why: a bot that "does not answer" because nothing is bound shows it
 * on its admin view. Best effort, and only for such events: the event is recorded and acknowledged either way.
 */
async function noteUnbound(env: Env, bot: Bot, ev: CanonicalEvent & { event_id: string }): Promise<void> {
  const db = dbOf(env);
  const reason = await unboundReason(db, { eventType: ev.event_type, conversationId: ev.conversation_id, botId: bot.botId, workspaceId: bot.workspaceId, chatId: ev.chat_id }).catch((err: unknown) => {
    console.error(`bot ${bot.botId}: why event ${loggedId(ev.event_id)} went unbound was not read: ${loggedError(err)}`);
    return "not known (the agents could not be read)";
  });
  await noteUnboundEvent(db, bot, { event_id: ev.event_id, event_type: ev.event_type, conversation_id: ev.conversation_id, thread_id: ev.thread_id ?? null, reason });
}

/**
 * Files are downloaded before the event is recorded (the runner gets
 * artifact references). A file the host cannot fetch does not lose the
 * message, nor the other files: it is left out, and the reason kept in the
 * event's metadata (`attachments_unavailable`). `own`: the event's own files, stored already.
 */
async function acceptWithFiles(deps: IngestDeps, ev: CanonicalEvent, event: NormalizedEvent, notRead: string | null, own: OwnFiles | null) {
  const { env, publicBaseUrl } = deps;
  // A redelivery downloads nothing again: acceptEvent answers it as a duplicate.
  const redelivered = (event.files.length === 0 && notRead === null) || (await eventLogStore(dbOf(env)).get(ev.event_id!).catch(discardingOwn(env, own)));
  if (redelivered) {
    await discardOwnFiles(env, own);
    return acceptEvent(env, ev, publicBaseUrl);
  }
  // An album's item tells its conversation it is coming before the download, which may outlast the album's wait.
  const settled = await announceAlbumItem(env, ev, event.files.length);
  try {
    // Once acceptEvent has them, its batch names the blobs stored alongside, or it removes them as its own.
    const accepted = await acceptEvent(env, await withFiles(deps, ev, event, notRead, own).catch(discardingOwn(env, own)), publicBaseUrl);
    // Recorded by another delivery meanwhile: what this one stored is named by nothing.
    if (accepted.disposition === "duplicate") await discardOwnFiles(env, own);
    return accepted;
  } finally {
    await settled();
  }
}

/** A step before acceptEvent failed: the request fails, and the platform's redelivery stores the files anew. */
const discardingOwn = (env: Env, own: OwnFiles | null) => async (err: unknown): Promise<never> => {
  await discardOwnFiles(env, own);
  throw err;
};

/**
 * The event with its files to store: those the platform gave (as sources), the reasons for those it did not, after
 * `notRead` (a replied message not read). A replied message's files come after the event's own, so those are fetched
 * first when time runs short.
 */
async function withFiles(deps: IngestDeps, ev: CanonicalEvent, event: NormalizedEvent, notRead: string | null, own: OwnFiles | null): Promise<CanonicalEvent> {
  // Platforms that want an answer within seconds get it: files not fetched by then are left out (and said so).
  const rest = await fileSources(deps.adapter, deps.bot, event, own ? event.files.slice(own.count) : event.files, () => timeLeft(deps));
  const unavailable = [...(notRead === null ? [] : [notRead]), ...(own?.unavailable ?? []), ...rest.unavailable];
  const metadata = unavailable.length ? { ...ev.metadata, attachments_unavailable: unavailable.join("; ") } : ev.metadata;
  return { ...ev, metadata, attachmentSources: [...(own?.sources ?? []), ...rest.sources], attachmentDeadlineAt: ackDeadlineAt(deps), attachmentsOptional: true };
}
