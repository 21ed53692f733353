/**
 * A reply's own files, fetched while the message it replies to is read (./replied.ts: a Slack thread's parent, a Lark
 * reply's message, up to 1 s), not after it: that read would otherwise come out of the time the files have before the
 * platform's acknowledgement deadline, and they are what the message itself says. Stored as the event's files are
 * (src/artifacts/input.ts), their rows written in its batch (`stored` sources); the replied message's files follow
 * them in what time is left. Blobs of an event this attempt does not record are removed.
 */
import { storeInputAttachments, type InputAttachmentSource } from "../artifacts/input";
import { artifactsOf } from "../artifacts/bucket";
import { loggedError } from "../lib/describe-error";
import { dbOf } from "../db/connect";
import { configOf, type Env } from "../env";
import { conversationKey } from "../stores/conversation-key";
import { eventLogStore } from "../stores/event-log";
import { fileSources } from "./file-sources";
import type { Bot, NormalizedEvent, PlatformAdapter } from "./types";

export interface OwnFiles {
  /** How many of the event's files (its first) these are. */
  count: number;
  sources: InputAttachmentSource[];
  unavailable: string[];
  written: string[];
  /** When the platform wants its answer: R2 calls for these files end by then (artifacts/bounded-bucket.ts). */
  deadlineAt: number | undefined;
}

interface Deps {
  env: Env;
  adapter: PlatformAdapter;
  bot: Bot;
  timeLeft: () => number;
  deadlineAt: number | undefined;
}

/** Null when there is no read to run them alongside: no replied message to read, no file, or a redelivery. */
export async function ownFilesAlongside({ env, adapter, bot, timeLeft, deadlineAt }: Deps, event: NormalizedEvent, eventId: string): Promise<OwnFiles | null> {
  const { conversationId } = event;
  if (event.repliesTo === undefined || !adapter.readReplied || event.unread || event.files.length === 0 || event.eventType === null || conversationId === null) return null;
  // Only files to fetch: one already stored (re-used by id) is no row of this event's.
  if (event.files.some((f) => f.artifactId !== undefined)) return null;
  const db = dbOf(env);
  // A redelivery fetches nothing again: acceptEvent answers it as a duplicate.
  if (await eventLogStore(db).get(eventId)) return null;
  const given = await fileSources(adapter, bot, event, event.files, timeLeft);
  const owner = { eventId, conversationId, conversationKey: conversationKey({ workspaceId: bot.workspaceId, botId: bot.botId, conversationId, threadId: event.threadId }) };
  const stored = await storeInputAttachments({ db, bucket: artifactsOf(env, deadlineAt), config: configOf(env), fetchDeadlineAt: deadlineAt }, owner, given.sources, { optional: true });
  return { count: event.files.length, sources: stored.rows.map((row) => ({ kind: "stored", row })), unavailable: [...given.unavailable, ...stored.unavailable], written: stored.written, deadlineAt };
}

/** Both, once both are done: the files stored alongside a read that failed are removed. */
export async function readWithOwnFiles<T>(env: Env, read: Promise<T>, own: Promise<OwnFiles | null>): Promise<[T, OwnFiles | null]> {
  const [r, o] = await Promise.allSettled([read, own]);
  if (r.status === "rejected") {
    if (o.status === "fulfilled") await discardOwnFiles(env, o.value);
    throw r.reason;
  }
  if (o.status === "rejected") throw o.reason;
  return [r.value, o.value];
}

/**
 * The blobs stored for an event another delivery recorded, or that was not recorded at all: named by nothing. Best
 * effort: R2 refusing or not answering fails neither the answer nor the error it carries, and the orphan walk
 * (retention/orphans.ts) takes what is left.
 */
export async function discardOwnFiles(env: Env, own: OwnFiles | null): Promise<void> {
  if (!own || own.written.length === 0) return;
  await artifactsOf(env, own.deadlineAt)
    .delete(own.written)
    .catch((err: unknown) => console.warn(`${own.written.length} blob(s) of an event not recorded left to the orphan walk (${loggedError(err)})`));
}
