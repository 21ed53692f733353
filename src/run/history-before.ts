import { and, eq, lt, ne, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { transcript } from "../db/schema";
import { readableItem } from "../stores/private-audience";
import { ARTIFACTS_ITEM } from "../stores/transcript";
import { audienceOf, type RunJob } from "./job";

/**
 * ctx.context.has_history_before, exact: whether history.page before the run's latest_cursor finds anything, for the
 * run's own eyes (an item private to another audience is none of its history; stores/private-audience.ts). Read with
 * the run's claim (one indexed EXISTS in its round trip); `place` says for which job it was read.
 */
export interface HistoryBefore {
  place: string;
  exists: boolean;
}

/** The seq the run's history ends before: its own item's, else just past the newest item when its event came. */
function boundOf(job: RunJob): number | null {
  if (job.transcriptSeq !== null) return job.transcriptSeq;
  return typeof job.latestTranscriptSeq === "number" ? job.latestTranscriptSeq + 1 : null;
}

const placeOf = (job: RunJob) => JSON.stringify([job.conversationKey, boundOf(job), audienceOf(job)]);

/** One indexed look for a single item, batched with the claim; as history.page reads by default (no artifact items). */
export function historyBeforeStatement(db: Db, job: RunJob) {
  const t = transcript;
  const within = and(eq(t.conversationKey, job.conversationKey), lt(t.seq, boundOf(job) ?? 0), ne(t.itemType, ARTIFACTS_ITEM), readableItem(db, t.eventId, audienceOf(job)));
  return db.select({ one: sql<number>`1` }).from(t).where(within).limit(1);
}

export function historyBeforeOf(job: RunJob, rows: unknown): HistoryBefore {
  return { place: placeOf(job), exists: (rows as unknown[]).length > 0 };
}

/**
 * The answer read at the claim when it was read for this job; else (its message revised into another since, none read)
 * what the job's seqs say: a hint that counts items the run may not read.
 */
export function hasHistoryBefore(job: RunJob, read: HistoryBefore | undefined): boolean {
  if (read && read.place === placeOf(job)) return read.exists;
  return job.transcriptSeq !== null ? job.transcriptSeq > 1 : typeof job.latestTranscriptSeq === "number";
}
