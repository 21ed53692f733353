import { sql } from "drizzle-orm";
import { batchAll } from "../db/client";
import { mayHaveApplied } from "../db/executor";
import type { ResultOf } from "../db/compiled";
import { dbOf } from "../db/connect";
import { eventLog } from "../db/schema";
import { configOf, type Env } from "../env";
import { randomHex } from "../lib/crypto";
import { headOf } from "../lib/text";
import { HostError } from "../lib/errors";
import { newId, newRunId } from "../lib/ids";
import { parseJson } from "../lib/json";
import type { AgentEventContext, InputContext } from "../protocol/context";
import { textOfElements } from "../protocol/common";
import type { RunJob } from "../run/job";
import { jobAgentOf, jobRunnerOf } from "../run/job-parts";
import { resolutionValues, resolveBinding, type BoundAgent } from "../stores/binding-resolution";
import { conversationKey } from "../stores/conversation-key";
import { eventLogStore, type EventRow } from "../stores/event-log";
import { isNotStarted, runsStore } from "../stores/runs";
import { transcriptInsert } from "../stores/transcript";
import type { InputAttachmentSource } from "../artifacts/input";
import { artifactExpiry } from "../artifacts/policy";
import { artifactsStore } from "../stores/artifacts";
import { artifactsOf } from "../artifacts/bucket";
import { inputWithAttachments } from "./attachments";
import { lostRunAgent } from "./lost-run-agent";
import { eventInsert, latestTranscriptSeq, recordedEvent, runInsert, userItemSeq } from "./statements";
import type { PlatformDelivery } from "../platforms/types";
import { repliedArtifactIds, withReplyAttachments } from "../platforms/reply-context";
import { albumIdOf } from "../platforms/telegram/album";

/** An event after normalisation, whatever its ingress (HTTP API, platform webhook). */
export interface CanonicalEvent {
  event_id?: string;
  event_type: string;
  event_time?: string;
  source: string;
  source_event_type?: string | null;
  raw_ref?: string | null;
  /**
   * A platform's request sent only once, its raw payload stored alongside: asked once the event is recorded, before
   * its run is handed over; false when the payload was not stored (its rows cleared of `raw_ref` meanwhile), and the
   * run is then handed none (platforms/raw-payload.ts RawCopy).
   */
  rawRefHeld?: () => Promise<boolean>;
  workspace_id?: string | null;
  bot_id?: string | null;
  conversation_id: string;
  thread_id?: string | null;
  actor: { actor_type: string; actor_id?: string | null; actor_name?: string | null; metadata: Record<string, unknown> };
  subject?: { subject_type: string; subject_id?: string | null; data: Record<string, unknown> } | null;
  input: InputContext;
  /** Binary inputs to store as artifacts before the run; their refs are appended to `input.attachments`. */
  attachmentSources?: InputAttachmentSource[];
  /** Attachment URL fetches end by this time (a platform's acknowledgement deadline). */
  attachmentDeadlineAt?: number;
  /**
   * A chat platform's files: one that cannot be stored is left out, the message still runs, and the reasons
   * join `metadata.attachments_unavailable` (an API caller's bad attachment refuses its event instead).
   */
  attachmentsOptional?: boolean;
  data: Record<string, unknown>;
  metadata: Record<string, unknown>;
  /** What an API event says (fingerprint.ts), kept with it: a repeat of its event_id saying otherwise is refused. */
  fingerprint?: string;
  /** A chat message's own id on its platform, as its recalls and edits name it (src/platforms/message-ref.ts). */
  message_ref?: string | null;
  /** Where a chat platform's reply goes; carried to the run (never recorded: it may hold a short-lived token). */
  delivery?: PlatformDelivery;
  /** False for a group's message that did not address the bot (NormalizedEvent.addressed): its agent's trigger_policy decides. */
  addressed?: false;
  /** The chat a platform event happened in when it continues another chat's conversation (NormalizedEvent.chatId): its scope binds it too. */
  chat_id?: string;
}

export type Disposition = "started" | "queued" | "steered" | "merged" | "rejected" | "duplicate" | "unbound" | "unaddressed";
export interface Accepted {
  event_id: string;
  run_id: string | null;
  disposition: Disposition;
  /** Why a `rejected` event was (metadata.rejection's reason), for a chat's acknowledgement; not part of the API's answer. */
  rejection?: string;
}

const eventIdConflict = (message: string) => new HostError(409, "event_id_conflict", message);

/** What the user said: `text`, or else the text elements of `contents`, so history and search read a message sent as parts too. */
const userText = (i: InputContext) => i.text || textOfElements(i.contents) || null;

const hasInput = (i: InputContext) => Boolean(i.text) || i.contents.length > 0 || i.attachments.length > 0;

/**
 * Record an event and hand it to its conversation's Durable Object.
 * One libSQL batch writes the EventLog row, the user transcript item and the
 * run row; the last two are guarded on this attempt owning the event row, so
 * a repeated event_id writes nothing and starts nothing.
 */
export async function acceptEvent(env: Env, ev: CanonicalEvent, publicBaseUrl: string): Promise<Accepted> {
  const db = dbOf(env);
  const eventId = ev.event_id ?? newId("evt");
  // In UTC, as every timestamp the host sends (a client's offset is normalised, the instant unchanged).
  const eventTime = new Date(ev.event_time ?? Date.now()).toISOString();
  const key = conversationKey({ workspaceId: ev.workspace_id, botId: ev.bot_id, conversationId: ev.conversation_id, threadId: ev.thread_id });
  const doId = env.CONVERSATIONS.idFromName(key);
  // Minted before we know whether an agent binds; used only if one does.
  const runId = newRunId(doId.toString());
  const acceptId = randomHex(8);
  const now = Date.now();
  // Blobs first (R2 is not part of the batch); their rows join the batch below, guarded like the transcript item. R2
  // calls end by the platform's deadline too, as the fetches do.
  const bucket = artifactsOf(env, ev.attachmentDeadlineAt);
  const attached = await inputWithAttachments(
    { db, bucket, config: configOf(env), fetchDeadlineAt: ev.attachmentDeadlineAt },
    { eventId, clientChosenId: ev.event_id !== undefined, conversationKey: key, conversationId: ev.conversation_id, input: ev.input },
    ev.attachmentSources ?? [],
    ev.attachmentsOptional,
  );
  const unavailable = [ev.metadata.attachments_unavailable, ...attached.unavailable].filter((r) => typeof r === "string" && r !== "");
  // A reply's data names which of its inputs came from the message it replies to (their ids are known only now).
  ev = { ...ev, input: attached.input, data: withReplyAttachments(ev.data, { attachments: attached.input.attachments, rows: attached.artifactRows, sources: ev.attachmentSources ?? [] }), metadata: unavailable.length ? { ...ev.metadata, attachments_unavailable: unavailable.join("; ") } : ev.metadata };
  const albumItem = albumIdOf(ev) !== null;
  const resolveQuery = { eventType: ev.event_type, conversationId: ev.conversation_id, botId: ev.bot_id, workspaceId: ev.workspace_id, unaddressed: ev.addressed === false, albumItem, text: userText(ev.input), chatId: ev.chat_id };
  const values = {
    ...resolutionValues(resolveQuery),
    eventId,
    eventType: ev.event_type,
    eventTime,
    source: ev.source,
    sourceEventType: ev.source_event_type ?? null,
    workspaceId: ev.workspace_id ?? null,
    botId: ev.bot_id ?? null,
    conversationKey: key,
    conversationId: ev.conversation_id,
    threadId: ev.thread_id ?? null,
    actorType: ev.actor.actor_type,
    actorId: ev.actor.actor_id ?? null,
    actorName: ev.actor.actor_name ?? null,
    subjectType: ev.subject?.subject_type ?? null,
    subjectId: ev.subject?.subject_id ?? null,
    inputJson: JSON.stringify(ev.input),
    inputSummary: headOf(userText(ev.input) ?? "", 200) || null,
    dataJson: JSON.stringify(ev.data),
    rawRef: ev.raw_ref ?? null,
    runId,
    acceptId,
    metadataJson: JSON.stringify(ev.metadata),
    fingerprint: ev.fingerprint ?? null,
    messageRef: ev.message_ref ?? null,
    createdAt: now,
  };
  const userItem = hasInput(ev.input)
    ? [
        transcriptInsert(
          db,
          {
            transcriptId: newId("tr"),
            conversationKey: key,
            eventId,
            conversationId: ev.conversation_id,
            threadId: ev.thread_id,
            role: "user",
            itemType: "message",
            content: userText(ev.input),
            contentJson: ev.input.contents.length ? ev.input.contents : undefined,
            artifactRefs: ev.input.attachments,
            metadata: { actor_type: ev.actor.actor_type, actor_id: ev.actor.actor_id ?? null, actor_name: ev.actor.actor_name ?? null },
          },
          acceptId,
        ),
      ]
    : [];

  // Attachment rows are rare and vary in number, so they stay uncompiled, guarded like the rest.
  const owned = () => sql`EXISTS (SELECT 1 FROM ${eventLog} WHERE ${eventLog.eventId} = ${eventId} AND ${eventLog.acceptId} = ${acceptId})`;
  // Files a chat reply re-used rather than stored again live as long as its own would (their expiry is moved, never shortened).
  const reused = repliedArtifactIds(ev.attachmentSources, ev.input.attachments);
  const extended = reused.length ? [artifactsStore(db).extendStatement(reused, artifactExpiry(configOf(env), now), now, owned())] : [];
  const writes = [eventInsert(db, values), ...userItem, runInsert(db, values), ...attached.artifactRows.map((row) => artifactsStore(db).insertStatement(row, owned())), ...extended];
  // Resolution, writes and read-back in one transaction: what is written is what was resolved.
  // The event's own user item, or for an event without one the conversation's newest item.
  const itemSeq = userItem.length ? userItemSeq(db, values) : latestTranscriptSeq(db, values);
  const results = await batchAll(db, [...writes, recordedEvent(db, values), itemSeq, resolveBinding(db, resolveQuery)]).catch(async (err: unknown) => {
    // Refused, nothing names the blobs this attempt wrote (they are its own): removed. Unanswered, the batch may
    // have been applied and its rows name them: kept (a retry answers "duplicate" and its run reads them).
    if (!mayHaveApplied(err)) await deleteBlobs(bucket, attached.written);
    throw err;
  });
  // The three reads follow the writes, in this order.
  const [rows, items, resolved] = results.slice(writes.length) as [ResultOf<typeof recordedEvent>, { seq: number | null }[], BoundAgent[]];
  // A runner is never handed a raw_ref the host cannot serve: the payload's put is waited for (it ends by the
  // platform's deadline), and one not stored is named by neither the run nor, cleared by then, the row event.get reads.
  if (ev.raw_ref && ev.rawRefHeld && !(await ev.rawRefHeld())) ev = { ...ev, raw_ref: null };
  const row = rows[0];
  const bound = resolved[0];
  const seqs = { transcriptSeq: userItem.length ? (items[0]?.seq ?? null) : null, latestTranscriptSeq: items[0]?.seq ?? null };

  if (row.acceptId !== acceptId) {
    // Another attempt recorded the event: the blobs this one wrote are named by nothing.
    await deleteBlobs(bucket, attached.written);
    // An API caller's id already taken in another conversation is no repeat but a collision (ids numbered per
    // conversation): answered `duplicate`, this message would be dropped without a word. A platform's ids are its own.
    if (ev.source === "api" && row.conversationKey !== key) throw eventIdConflict(`event_id ${eventId} already names an event of another conversation: an event_id is unique across the host (a repeat names the same conversation); send this message with a new one`);
    // Nor is one saying something else (another text, actor, data...): a retry sends the same event. A platform's
    // redelivery has no fingerprint, nor has an event recorded before there were any: repeats, as they always were.
    if (ev.fingerprint && row.fingerprint && ev.fingerprint !== row.fingerprint) throw eventIdConflict(`event_id ${eventId} already names another event of this conversation, which said something else: a repeat must send the same event (its event_time aside); send this message with a new event_id`);
    // A repeat: answer with the first run and start nothing, unless that run never reached its DO.
    let runOfRepeat = row.runId ?? null;
    // What the event ended up with, as its row says now: a decision taken since this batch read it (steered into
    // another run, rejected) discarded the run it named.
    const decidedSince = async () => (await eventLogStore(db).get(eventId))?.runId ?? null;
    const first = row.runId ? await runsStore(db).get(row.runId) : undefined;
    // Only a true repeat: one naming another conversation must not take the run there. The run is its agent's, whatever
    // binds the conversation now (lostRunAgent): an agent that can no longer take it fails it at once.
    if (row.runId && row.disposition === "bound" && isNotStarted(first?.status) && first.conversationKey === key) {
      const recorded = await eventLogStore(db).get(eventId);
      const asFirst = recorded ? asRecorded(ev, recorded) : ev;
      // The event's own item as recorded, whatever the repeat carries (one without the input read no item above).
      const transcriptSeq = seqs.transcriptSeq ?? (hasInput(asFirst.input) ? ((await userItemSeq(db, values).execute())[0]?.seq ?? null) : null);
      // An event without an item of its own comes after the history as it stood when it arrived, not as it stands now.
      const arrival = transcriptSeq === null ? first.latestTranscriptSeq : null;
      const latestTranscriptSeq = arrival === null ? (transcriptSeq ?? seqs.latestTranscriptSeq) : arrival || null;
      const job = buildJob({ ev: asFirst, eventId, eventTime: recorded?.eventTime ?? eventTime, key, runId: row.runId, eventSeq: row.seq, transcriptSeq, latestTranscriptSeq, ...(await lostRunAgent(db, first, bound)), publicBaseUrl, joinsAlbumOnly: albumItem && bound?.declines === 1 });
      const decided = await env.CONVERSATIONS.get(doId).redeliver(job);
      // Steered or rejected now, the first run is gone: the answer names what the event ended up with.
      if (decided.disposition === "steered" || decided.disposition === "merged" || decided.disposition === "rejected" || decided.disposition === "unaddressed") runOfRepeat = decided.runId;
      else if (decided.disposition === "duplicate") runOfRepeat = await decidedSince();
    } else if (row.runId && !first) runOfRepeat = await decidedSince();
    return { event_id: eventId, run_id: runOfRepeat, disposition: "duplicate" };
  }
  // Recorded with its user item, which later runs read; nothing runs, nor is anything in the conversation told of it.
  if (row.disposition === "unaddressed") return { event_id: eventId, run_id: null, disposition: "unaddressed" };
  if (!bound || row.runId !== runId) return { event_id: eventId, run_id: null, disposition: "unbound" };
  const job = buildJob({ ev, eventId, eventTime, key, runId, eventSeq: row.seq, ...seqs, agent: jobAgentOf(bound.agent), runner: jobRunnerOf(bound.runner, bound.service), publicBaseUrl, joinsAlbumOnly: albumItem && bound.declines === 1 });
  const decided = await env.CONVERSATIONS.get(doId).dispatch(job);
  return { event_id: eventId, run_id: decided.runId, disposition: decided.disposition, ...(decided.rejection ? { rejection: decided.rejection } : {}) };
}

/**
 * The event as first recorded, for a repeat that hands its lost run over: the run is for what EventLog holds (its
 * stored attachments, its time, its actor: what runners read back with `event.get`), not for what the repeat says.
 * Actor metadata and subject data are not recorded: the repeat's are kept when it names the same actor and subject.
 */
function asRecorded(ev: CanonicalEvent, row: EventRow): CanonicalEvent {
  const sameActor = ev.actor.actor_type === row.actorType && (ev.actor.actor_id ?? null) === row.actorId;
  const sameSubject = (ev.subject?.subject_type ?? null) === row.subjectType && (ev.subject?.subject_id ?? null) === row.subjectId;
  return {
    ...ev,
    event_type: row.eventType,
    source_event_type: row.sourceEventType,
    raw_ref: row.rawRef,
    actor: { actor_type: row.actorType ?? ev.actor.actor_type, actor_id: row.actorId, actor_name: row.actorName, metadata: sameActor ? ev.actor.metadata : {} },
    subject: row.subjectType ? { subject_type: row.subjectType, subject_id: row.subjectId, data: sameSubject ? (ev.subject?.data ?? {}) : {} } : null,
    input: parseJson<InputContext>(row.inputJson ?? "", ev.input),
    data: parseJson<Record<string, unknown>>(row.dataJson, {}),
    metadata: parseJson<Record<string, unknown>>(row.metadataJson, {}),
  };
}

/** Best effort: a blob left behind costs storage until the orphan walk takes it (retention/orphans.ts), never the answer. */
async function deleteBlobs(bucket: R2Bucket, keys: string[]): Promise<void> {
  if (keys.length) await bucket.delete(keys).catch(() => {});
}

interface JobParts {
  ev: CanonicalEvent;
  eventId: string;
  eventTime: string;
  key: string;
  runId: string;
  eventSeq: number;
  transcriptSeq: number | null;
  latestTranscriptSeq: number | null;
  agent: RunJob["agent"];
  runner: RunJob["runner"];
  publicBaseUrl: string;
  joinsAlbumOnly: boolean;
}

function buildJob({ ev, eventId, eventTime, key, runId, eventSeq, transcriptSeq, latestTranscriptSeq, agent, runner, publicBaseUrl, joinsAlbumOnly }: JobParts): RunJob {
  const event: AgentEventContext = {
    event_id: eventId,
    event_type: ev.event_type,
    event_time: eventTime,
    source: ev.source,
    source_event_type: ev.source_event_type ?? null,
    raw_ref: ev.raw_ref ?? null,
    data: ev.data,
  };
  return {
    runId,
    conversationKey: key,
    publicBaseUrl,
    event,
    eventSeq,
    transcriptSeq,
    latestTranscriptSeq,
    conversation: {
      conversation_id: ev.conversation_id,
      thread_id: ev.thread_id ?? null,
      bot_id: ev.bot_id ?? null,
      workspace_id: ev.workspace_id ?? null,
      sender_id: ev.actor.actor_id ?? null,
    },
    actor: ev.actor,
    subject: ev.subject ?? null,
    input: ev.input,
    agent,
    runner,
    ...(ev.delivery ? { delivery: ev.delivery } : {}),
    ...(joinsAlbumOnly ? { joinsAlbumOnly } : {}),
  };
}
