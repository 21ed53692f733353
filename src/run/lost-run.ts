import type { Db } from "../db/client";
import { DeliverySession, type DeliveryDeps } from "../delivery/session";
import { loggedError } from "../lib/describe-error";
import { runsStore, type LedgerEntry } from "../stores/runs";
import { endRecordedMeanwhile, endRunAsHost } from "./host-end";
import type { RunJob } from "./job";
import { recordedEnd } from "./recorded-end";
import { ledgerDrops } from "./drop-records";
import type { UnloggedEnd } from "./end-log";
import type { UnansweredEnds } from "./unanswered-ends";

/** What this instance still has of a run that could not record its end: its reply, and how far its followers were told. */
export interface UnrecordedRun {
  reply?: DeliverySession;
  publishedUpTo: number;
  /** Its own end, whose write got no answer: what it knew of the run goes on the line of the end as lost. */
  unlogged?: UnloggedEnd;
}

/**
 * Ends a run whose session is gone (`host.session_lost`) and, for a chat run
 * this write ended, tells the user. The run's own reply, when this instance
 * still has it (the run could not record its end), knows what it showed and
 * says so itself. Without it, unless a platform had accepted some of the reply
 * (its delivery trail), a new session is given the run's whole ledger, as the
 * next instance would give it (PendingReplies.recover): its recorded answer and
 * the files after it, or the failure notice if it recorded none (only the
 * notice when a send of its reply may be in the chat: PostingMarks).
 * Its `run.failed` goes to the run's live followers (after what this instance's writes left in its ledger unpublished:
 * publishHostEnd). A run whose own end was
 * applied meanwhile (its write went unanswered) is not ended again: its followers
 * and its reply get what it recorded. The artifacts it announced after its last
 * message get their item, and its drops past the audit cap their count, as for a
 * run ending any other way (and its line, by the end of `unanswered` that recorded it). Returns the session to settle.
 */
export async function endLostRun(deps: DeliveryDeps, job: RunJob, kept: UnrecordedRun | undefined, publish: (entries: LedgerEntry[]) => void, unanswered?: UnansweredEnds): Promise<DeliverySession | null> {
  // Abandoned meanwhile (its settle timed out during a long outage), it can no longer say anything.
  const reply = kept?.reply?.usable ? kept.reply : undefined;
  const delivered = !reply && job.delivery ? await runsStore(deps.db).deliveredReply(job.conversationKey, job.runId) : false;
  const outcome = { status: "failed" as const, errorCode: "host.session_lost", errorMessage: "the host instance running this run lost its state", retryable: true };
  const { item } = await recordedEnd(deps.db, job);
  const ended = await endRunAsHost(deps.db, job, outcome, { item, drops: ledgerDrops(job.runId), known: kept?.unlogged?.facts, unanswered });
  if (ended) {
    // What a part of its own end's write applied unanswered left in the ledger comes first; lost with an earlier
    // instance, its followers here read the ledger as they joined, and only the end is theirs to hear.
    if (kept) await publishHostEnd(deps.db, job.runId, kept.publishedUpTo, ended, publish);
    else publish([ended]);
    if (reply) return DeliverySession.failureNotice(deps, job, "host.session_lost", reply);
    // A send an earlier instance had on the wire may be in the chat: the recorded answer is not posted again, the notice
    // (a message of its own) is; the earlier marks are done with.
    const showsTwice = !delivered && job.delivery ? ((await deps.marks?.wouldShowTwice(job)) ?? false) : false;
    deps.marks?.forget(job.runId);
    if (delivered) return null;
    return showsTwice ? DeliverySession.failureNotice(deps, job, "host.session_lost") : replyFromLedger(deps, job);
  }
  let session = null as DeliverySession | null;
  // A send of its answer an earlier instance had on the wire (or whose answer never came) may be in the chat: not posted twice.
  const showsTwice = !reply && job.delivery ? ((await deps.marks?.wouldShowTwice(job)) ?? false) : false;
  const meanwhile = await endRecordedMeanwhile(deps.db, job.runId, kept?.publishedUpTo ?? 0, () => {
    // Its reply goes on with what the run recorded; without it, a new one sends it, unless a platform had (or may have had) part of it.
    session = reply ?? (delivered || showsTwice ? null : DeliverySession.open(deps, job));
    return (entries) => {
      publish(entries);
      session?.feed(entries);
    };
  });
  if (!reply) deps.marks?.forget(job.runId);
  return meanwhile === null ? null : session;
}

/**
 * Tells a run's live followers of the end the host wrote after the run's own end could not be written: first what its
 * ledger holds that they were not given (after `publishedUpTo`: a leading part of its end's write applied though
 * unanswered, ledger-writes.ts), then that end, as a replay gives them. The ledger unreadable, the end alone.
 */
export async function publishHostEnd(db: Db, runId: string, publishedUpTo: number, end: LedgerEntry, publish: (entries: LedgerEntry[]) => void): Promise<void> {
  // The end is the ledger's last entry: read back with the rest, it is published only after every page before it.
  const read = await endRecordedMeanwhile(db, runId, publishedUpTo, () => publish).catch((err: Error) => {
    console.error(`run ${runId}: ledger not read for its followers after the host ended it (${loggedError(err)})`);
    return null;
  });
  if (read === null) publish([end]);
}

/** A new reply from the whole ledger of a run just ended as lost; the ledger unreadable, what was read of it and the run's end. */
async function replyFromLedger(deps: DeliveryDeps, job: RunJob): Promise<DeliverySession | null> {
  let session: DeliverySession | null | undefined;
  const open = () => (session === undefined ? (session = DeliverySession.open(deps, job)) : session);
  try {
    const read = await endRecordedMeanwhile(deps.db, job.runId, 0, () => {
      const reply = open();
      return (entries) => reply?.feed(entries);
    });
    if (read !== null) return open();
  } catch (err) {
    console.error(`run ${job.runId}: lost run's ledger not read for its reply: ${loggedError(err)}`);
  }
  return DeliverySession.failureNotice(deps, job, "host.session_lost", open() ?? undefined);
}
