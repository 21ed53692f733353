import { jsonByteLength } from "../src/protocol/common";
import type { InputContext } from "../src/protocol/context";
import { albumIdOf as telegramAlbumOf } from "../src/platforms/telegram/album";
import { withoutFiles } from "../src/run/edited-input";
import { mergedDecision, type AlbumPart, type RunJob } from "../src/run/job";
import { sameAgent, type EventDecision, type RunTable, type StoredRun } from "./scheduling";
import { telegramMessageIdOf } from "./sent-order";

/**
 * Telegram sends an album (photos, videos or files sent together, the caption on one of them) as one update per
 * item, sharing a `media_group_id`. The user sent one message: the run of the first item to arrive waits
 * ALBUM_WAIT_MS, and the items arriving meanwhile join it instead of starting runs of their own, so one run gets
 * every file and the caption, and its answer quotes the album's first item. Each item is still its own EventLog event
 * and transcript item. Items announced by ingress and still downloading hold the run longer (album-gathering.ts).
 */

/** Telegram's own bound on an album's items: a run never gathers more. */
export const ALBUM_MAX_PARTS = 10;

/** The album an event is an item of, or null. */
export const albumIdOf = (job: RunJob): string | null => telegramAlbumOf(job.event);

/** Items in the order the user sent them (Telegram's message ids), whatever order their updates arrived in. */
const orderOf = (job: RunJob) => telegramMessageIdOf(job) ?? Number.MAX_SAFE_INTEGER;

/** The artifacts of an item's input that came from the message it replies to (platforms/reply-context.ts). */
function repliedIdsOf(job: RunJob): string[] {
  const reply = job.event.data.reply_to;
  const refs: unknown[] = reply && typeof reply === "object" && "attachments" in reply && Array.isArray(reply.attachments) ? reply.attachments : [];
  return refs.map((r) => (r && typeof r === "object" && "artifact_id" in r ? r.artifact_id : null)).filter((id): id is string => typeof id === "string");
}

function partOf(job: RunJob): AlbumPart {
  const replied = repliedIdsOf(job);
  return { eventId: job.event.event_id, runId: job.runId, order: orderOf(job), input: job.input, ...(replied.length ? { replied } : {}) };
}

/**
 * The items' inputs as one: their texts (a caption) joined, their contents and files in the album's order. The replied
 * message's files, which every item of an album sent as a reply carries, come once: those of the run's own event
 * (`headEventId`, whose `reply_to` names them), else of the first item that has them. Each other item's are left out
 * of its own input only: re-used as stored when the bot received that message, every item names the same artifacts.
 */
export function albumInput(parts: AlbumPart[], headEventId: string): InputContext {
  const texts = parts.map((p) => p.input.text).filter((t): t is string => typeof t === "string" && t !== "");
  const keeper = parts.find((p) => p.eventId === headEventId && p.replied?.length) ?? parts.find((p) => p.replied?.length);
  const own = (p: AlbumPart) => {
    const copies = new Set(p === keeper ? [] : (p.replied ?? []));
    return (c: object) => !("artifact_id" in c && typeof c.artifact_id === "string" && copies.has(c.artifact_id));
  };
  return { text: texts.length ? texts.join("\n\n") : null, contents: parts.flatMap((p) => p.input.contents.filter(own(p))), attachments: parts.flatMap((p) => p.input.attachments.filter(own(p))) };
}

/** A new run whose event is an album's item waits for the album's other items (0: albums are not gathered). */
export function asAlbumHead(run: StoredRun, waitMs: number, now: number): StoredRun {
  const albumId = albumIdOf(run.job);
  if (albumId === null || waitMs === 0) return run;
  const waitUntil = Math.max(run.notBefore, now + waitMs);
  const job: RunJob = { ...run.job, album: { mediaGroupId: albumId, waitUntil, parts: [partOf(run.job)] } };
  return { ...run, job, notBefore: waitUntil, bytes: jsonByteLength(job) };
}

/**
 * The run an album's item joins: one of its agent (as created: not the run of one deleted and created anew under its id,
 * which fails as it starts) gathering that album, not begun (`joinable`: not executing, not being cancelled) and not
 * full; or the run the item already joined (its decision's write went unanswered: it is made again).
 */
export function albumRunFor(table: RunTable, job: RunJob, joinable: (runId: string) => boolean): readonly [string, StoredRun] | undefined {
  const albumId = albumIdOf(job);
  if (albumId === null) return undefined;
  const gathering = table.filter(([, r]) => r.job.album?.mediaGroupId === albumId && r.job.agent.agentId === job.agent.agentId);
  return (
    gathering.find(([, r]) => r.job.album!.parts.some((p) => p.eventId === job.event.event_id)) ??
    gathering.find(([, r]) => r.state === "queued" && sameAgent(r.job, job.agent) && joinable(r.job.runId) && r.job.album!.parts.length < ALBUM_MAX_PARTS)
  );
}

/**
 * The item joins the gathering run, which waits ALBUM_WAIT_MS more for the next one (`store` keeps it, held longer by
 * items still on their way, and wakes the scheduler); answers the decision for the item, whose own run is discarded.
 * The run holds the item before that decision is written: a write that fails is answered as an error (the platform
 * sends the update again, and the decision is written then, or by the run's claim if it started meanwhile:
 * run/claim.ts), never a second run for the item.
 */
export function joinAlbum([key, run]: readonly [string, StoredRun], job: RunJob, waitMs: number, now: number, store: (key: string, run: StoredRun) => void): EventDecision {
  const album = run.job.album!;
  if (!album.parts.some((p) => p.eventId === job.event.event_id)) {
    const parts = [...album.parts, partOf(job)].sort((a, b) => a.order - b.order);
    // The answer quotes the album's first item (its lowest message id), not the first to arrive: an item sorted ahead
    // of the others brings its own delivery, which differs only in the message it quotes.
    const first = parts[0].eventId === job.event.event_id && job.delivery ? { delivery: job.delivery } : {};
    // Timed from its own wait (a run stored by an earlier release has none: its start), not from a hold by this item.
    const waitUntil = Math.max(album.waitUntil ?? run.notBefore, now + waitMs);
    const joined: RunJob = { ...run.job, ...first, input: albumInput(parts, run.job.event.event_id), album: { ...album, waitUntil, parts } };
    store(key, { ...run, job: joined, notBefore: waitUntil, bytes: jsonByteLength(joined) });
  }
  return mergedDecision(album.mediaGroupId, run.job.runId);
}

/**
 * The album's run without the files of artifacts `dropped` (an item's photo replaced by its user's edit, expired: a
 * runner would read a 404): gone from its input and from its items', which an item joining later is made from. Its
 * words stay (an item's edit does not say what the whole reads). Itself when it names none of them.
 */
export function albumWithoutFiles(job: RunJob, dropped: readonly string[]): RunJob {
  const album = job.album;
  const input = withoutFiles(job.input, dropped);
  const parts = album?.parts.map((p) => ({ ...p, input: withoutFiles(p.input, dropped) }));
  if (!album || !parts || (input === job.input && parts.every((p, i) => p.input === album.parts[i].input))) return job;
  return { ...job, input, album: { ...album, parts } };
}
