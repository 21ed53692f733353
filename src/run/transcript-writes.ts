import { sql, type SQL } from "drizzle-orm";
import type { Db } from "../db/client";
import { runEvent } from "../db/schema";
import type { ArtifactRef } from "../protocol/common";
import type { LedgerEntry } from "../stores/runs";
import { transcriptInsertWhere, transcriptInsertWhileRunning, type NewTranscriptItem } from "../stores/transcript";
import { whileRunning } from "../stores/while-running";
import type { RunArtifactRefs } from "./artifact-refs";
import type { RunJob } from "./job";
import { recordedEnd } from "./recorded-end";

/**
 * The run's transcript items with their refs checked (the stored facts, refused ones left out; content naming an
 * artifact never stored too); an item of artifacts left with none is not written. With `guard`, each only if it holds too.
 */
export function transcriptStatements(db: Db, runId: string, items: NewTranscriptItem[], refs: RunArtifactRefs, guard?: SQL) {
  for (const item of items) {
    item.artifactRefs = refs.resolve((item.artifactRefs ?? []) as ArtifactRef[]);
    item.contentJson = refs.withoutUnstored(item.contentJson);
  }
  const kept = items.filter((item) => item.itemType !== "artifacts" || item.artifactRefs?.length);
  return kept.map((item) => (guard ? transcriptInsertWhere(db, { ...item, runId }, sql`${whileRunning(runId)} AND ${guard}`) : transcriptInsertWhileRunning(db, { ...item, runId })));
}

/**
 * The end's items (its trailing artifacts': ResultProcessor.finish). After a batch whose write got no answer (`undecided`),
 * they take it as applied, and are written only if it was (its entry is in the ledger when the end is written); else
 * the item the ledger owes without it (recordedEnd, read now: the batch cannot land after that unnoticed, as the end's
 * write asks again), so neither names an artifact whose row the batch never wrote nor leaves out one before it.
 */
export async function trailingItems(db: Db, job: RunJob, items: NewTranscriptItem[], refs: RunArtifactRefs, undecided: LedgerEntry | undefined): Promise<unknown[]> {
  if (!undecided) return transcriptStatements(db, job.runId, items, refs);
  const landed = sql`EXISTS (SELECT 1 FROM ${runEvent} WHERE ${runEvent.runId} = ${job.runId} AND ${runEvent.seq} = ${undecided.seq})`;
  const without = await recordedEnd(db, job).catch(() => null);
  const instead = without?.item ? [transcriptInsertWhere(db, without.item, sql`${whileRunning(job.runId)} AND NOT ${landed}`)] : [];
  return [...transcriptStatements(db, job.runId, items, refs, landed), ...instead];
}
