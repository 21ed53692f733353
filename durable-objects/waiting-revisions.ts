import type { Db } from "../src/db/client";
import { replyingTo } from "../src/platforms/reply-to";
import { jsonByteLength } from "../src/protocol/common";
import type { SteeringInputItem } from "../src/protocol/host-api-results";
import { withEditedText, type MessageEdit } from "../src/run/edited-input";
import type { RunJob } from "../src/run/job";
import type { RunOutcome } from "../src/stores/runs";
import { albumWithoutFiles } from "./albums";
import type { RunTableStore } from "./run-table";
import type { StoredRun } from "./scheduling";
import type { SteeringQueue } from "./steering-queue";

/**
 * A chat message recalled or edited, as ingress found it (src/platforms/revise-waiting.ts): its event, the run that
 * holds it (its own, or the run it was `steered` into), and for an edit its words now, the edit's version and the
 * artifacts of the files it replaced.
 */
export interface MessageRevision {
  eventId: string;
  runId: string;
  steered: boolean;
  edit?: MessageEdit;
}

export type RevisionOutcome = "withdrawn" | "edited" | "untouched";

/** Why a run ends when its message is recalled before it began: `cancelled`, as any run dropped while it waited. */
export const RECALLED_REASON = "its message was recalled before it was answered";
const RECALLED: RunOutcome = { status: "cancelled", errorCode: "cancelled", errorMessage: RECALLED_REASON };

export interface RevisionDeps {
  db: Db;
  runs: RunTableStore;
  steering: SteeringQueue;
  /** Runs this instance executes, from their start (their claim on its way: their runner not called yet). */
  active: (runId: string) => boolean;
  /** Queued runs the scheduler starts none of (being cancelled, or held here while a claimed message replaces its recalled one). */
  held: Set<string>;
  /** The scheduler looks again: a run held is free to start. */
  kick: () => void;
  /** A claim made ahead of a run's start is void (it read the state of a sender the run no longer answers). */
  voidEarlyClaim: (runId: string) => void;
  /** A queued run ended `cancelled` for `reason`; whether this call ended it. */
  cancelQueued: (key: string, job: RunJob, reason: string) => Promise<boolean>;
  /** A run only libSQL knows (its hand-over still on its way) ended so, and that hand-over starts nothing; whether this call ended it. */
  endUnhanded: (runId: string, outcome: RunOutcome) => Promise<boolean>;
  /** A run only libSQL knows (its hand-over still on its way) gets these words when that hand-over comes. */
  editUnhanded: (runId: string, edit: NonNullable<MessageRevision["edit"]>) => Promise<void>;
}

/**
 * A recall withdraws a message no runner has yet: its queued run is cancelled, or its claim taken off the steering
 * queue (`steering.dropped`, reason `recalled`); a queued run holding later messages it claimed answers them instead.
 * An edit gives it its new words, so it is answered as edited. A run whose runner was called, a message already
 * pulled, is never touched. Idempotent: a recall or an edit delivered again finds the message gone, or the same words
 * (an older edit arriving late changes nothing).
 */
export async function reviseWaiting(deps: RevisionDeps, change: MessageRevision): Promise<RevisionOutcome> {
  const entry = await deps.runs.find(change.runId);
  // Read by ingress as its own run's while its claim was being recorded: steered since, the claiming run holds it.
  const claimant = !change.steered && !entry ? await deps.steering.claimantOf(change.eventId) : null;
  if (claimant) return reviseWaiting(deps, { ...change, runId: claimant, steered: true });
  // The message its run answers: its own, or a claimed one it took up in place of its own recalled one.
  const answered = entry !== undefined && entry[1].job.event.event_id === change.eventId;
  if (change.steered && !answered) {
    // The run it was steered into ended: its queue was dropped with it (or pulled).
    if (!entry) return "untouched";
    if (change.edit) return (await deps.steering.amend(change.runId, change.eventId, change.edit)) ? "edited" : "untouched";
    return (await deps.steering.withdraw(deps.db, entry[1].job, change.eventId)) ? "withdrawn" : "untouched";
  }
  // Not held here: ended (answered), or recorded with its hand-over still to come, which a recall ends now, and an
  // edit gives its words (kept for it; forgotten unused if it ended instead).
  if (!entry && change.edit) return deps.editUnhanded(change.runId, change.edit).then(() => "edited");
  if (!entry) return (await deps.endUnhanded(change.runId, RECALLED)) ? "withdrawn" : "untouched";
  // An album's item, the one its run was made for or one merged into it: an edit takes the files it replaced away.
  if (change.edit && entry[1].job.album?.parts.some((p) => p.eventId === change.eventId)) return editAlbum(deps, entry[0], change.edit);
  // Its own message recalled already: the run answers a message it claimed (this recall sent again changes nothing).
  if (!answered) return "untouched";
  return change.edit ? editOwnRun(deps, entry[0], change.edit) : recallOwnRun(deps, entry);
}

async function recallOwnRun(deps: RevisionDeps, [key, run]: [string, StoredRun]): Promise<RevisionOutcome> {
  if (run.state !== "queued") return "untouched";
  // Messages claimed by this run wait in it: cancelling it would drop them unanswered, so it answers them instead.
  // An album's run answers its other items, which would go with it: it answers this one too.
  const claimed = (await deps.steering.size(run.job.runId)) > 0;
  if (claimed && run.job.album) return "untouched";
  // No await from this check to cancelQueued's mark, or to the hold: the scheduler cannot start it in between (nor has it begun and ended since).
  if (deps.active(run.job.runId) || deps.held.has(run.job.runId) || !deps.runs.holdsNow(run.job.runId)) return "untouched";
  if (!claimed) return (await deps.cancelQueued(key, run.job, RECALLED_REASON)) ? "withdrawn" : "untouched";
  deps.held.add(run.job.runId);
  try {
    return await answerClaimedInstead(deps, key, run.job);
  } finally {
    deps.held.delete(run.job.runId);
    deps.kick();
  }
}

/**
 * The first message the run claimed takes its recalled message's place: its words, sender and place in the history,
 * and the reply quotes it; the others are pulled as before. The run is still the one ingress made for the recalled
 * message (its run row names that event); its runner sees only the message it answers.
 */
export async function answerClaimedInstead(deps: RevisionDeps, key: string, job: RunJob): Promise<RevisionOutcome> {
  const promoted = await deps.steering.promote(deps.db, job);
  const run = deps.runs.current(key);
  // Held since the checks: still queued, and stored under its key.
  if (!promoted || !run) return "untouched";
  const now = answering(run.job, promoted.item);
  deps.voidEarlyClaim(job.runId);
  await deps.runs.put(key, { ...run, job: now, bytes: jsonByteLength(now), revision: promoted.revision });
  return "withdrawn";
}

function answering(job: RunJob, item: SteeringInputItem): RunJob {
  const seqOf = (v: unknown) => (typeof v === "number" ? v : null);
  const transcriptSeq = seqOf(item.metadata.transcript_seq);
  return {
    ...job,
    event: item.event,
    input: item.input,
    conversation: item.conversation ?? job.conversation,
    actor: item.actor ?? null,
    subject: item.subject ?? null,
    eventSeq: seqOf(item.metadata.event_seq) ?? job.eventSeq,
    transcriptSeq,
    latestTranscriptSeq: transcriptSeq ?? job.latestTranscriptSeq,
    ...(job.delivery ? { delivery: { ...job.delivery, target: replyingTo(job.delivery.target, item.event) } } : {}),
  };
}

async function editAlbum(deps: RevisionDeps, key: string, edit: NonNullable<MessageRevision["edit"]>): Promise<RevisionOutcome> {
  // Read and written in one tick, as editOwnRun's; its words stay, so no edit's version is kept either.
  const run = deps.runs.current(key);
  if (!run || run.state !== "queued" || deps.held.has(run.job.runId)) return "untouched";
  const job = albumWithoutFiles(run.job, edit.dropped ?? []);
  if (job === run.job) return "untouched";
  await deps.runs.put(key, { ...run, job, bytes: jsonByteLength(job) });
  return "edited";
}

async function editOwnRun(deps: RevisionDeps, key: string, edit: NonNullable<MessageRevision["edit"]>): Promise<RevisionOutcome> {
  // Read and written in one tick: a run started here stays `queued` in the table until its runner is about to be
  // called (runOne reads its job then), so an edit made while it is being claimed still reaches its runner.
  const run = deps.runs.current(key);
  // An album's run reads its items together (the caption as its text): one item's edit does not say what the whole reads.
  if (!run || run.state !== "queued" || deps.held.has(run.job.runId) || run.job.album) return "untouched";
  if ((run.revision ?? -Infinity) > edit.version) return "edited";
  const job: RunJob = { ...run.job, input: withEditedText(run.job.input, edit.text, edit.dropped) };
  // The mirror changes in this tick (the scheduler starts it with these words from now on); the output gate holds the answer until the write is durable.
  await deps.runs.put(key, { ...run, job, bytes: jsonByteLength(job), revision: edit.version });
  return "edited";
}
