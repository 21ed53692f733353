import { and, eq, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { runEvent, transcript } from "../db/schema";
import { parseJson } from "../lib/json";
import { newId } from "../lib/ids";
import type { ArtifactRef } from "../protocol/common";
import { placeOfRun, type HostRecord } from "../stores/event-log";
import type { NewTranscriptItem } from "../stores/transcript";
import { RunArtifactRefs } from "./artifact-refs";
import { MAX_AUDITED_DROPS, UNKNOWN_TYPE_WARNING, unauditedDropsRecord } from "./drop-audit-cap";
import { artifactReaderOf, type RunJob } from "./job";

/** What a run the host ends owes its records beyond its end, rebuilt from its ledger. */
export interface RecordedEnd {
  /** The item of the artifacts it announced after its last message; null when none is left. */
  item: NewTranscriptItem | null;
  /** The record of its drops past the audit cap (drop-audit-cap.ts), as its own end would have written it; none when none were. */
  unauditedDrops: HostRecord[];
}

/**
 * What a run the host ends owes its records: the item of artifacts (README, Artifacts) its transcript is owed, rebuilt from what its ledger
 * recorded, as ResultProcessor would have made it had the run ended while its instance lived: the artifacts announced
 * after the last runner result that made a transcript message (a message.completed). Left out: results the host
 * dropped (its host.warning names their `ledger_seq`), artifacts the run may not attach (the stored facts are written,
 * as for any ref), and any an item of the run carries already. With it, the count of its drops no audit recorded.
 * One round trip (two with artifacts to check), reading a bounded number of rows: a runner flooding invalid results
 * leaves a warning each (hundreds of thousands within its stream's limit), counted and matched in the database.
 */
export async function recordedEnd(db: Db, job: Pick<RunJob, "runId" | "conversationKey" | "conversation" | "event" | "delivery" | "runner">): Promise<RecordedEnd> {
  const e = runEvent;
  const of = (origin: "runner" | "host", type: string) => and(eq(e.runId, job.runId), eq(e.origin, origin), eq(e.type, type));
  const namesResult = sql`json_type(${e.dataJson}, '$.ledger_seq') = 'integer'`;
  // The results the host dropped (or ignored, of an unknown type): each named by a warning. Uncorrelated, so built once
  // per statement; its columns name the subquery's own table.
  const dropped = sql`(SELECT json_extract(${e.dataJson}, '$.ledger_seq') FROM ${e} WHERE ${and(of("host", "host.warning"), namesResult)})`;
  const lastMessage = sql`(SELECT COALESCE(MAX(${e.seq}), 0) FROM ${e} WHERE ${and(of("runner", "message.completed"), sql`${e.seq} NOT IN ${dropped}`)})`;
  const [[counted], announced, items] = await db.batch([
    db.select({ drops: sql<number>`count(*)` }).from(e).where(and(of("host", "host.warning"), namesResult, sql`json_extract(${e.dataJson}, '$.code') IS NOT ${UNKNOWN_TYPE_WARNING}`)),
    // Only the id: inline content was stored under the id its entry names; the facts come from the artifact's row. At
    // most the run's RUN_MAX_ARTIFACTS: past it, each is dropped.
    db
      .select({ seq: e.seq, artifactId: sql<unknown>`json_extract(${e.dataJson}, '$.artifact_id')` })
      .from(e)
      .where(and(of("runner", "artifact.created"), sql`${e.seq} > ${lastMessage}`, sql`${e.seq} NOT IN ${dropped}`))
      .orderBy(e.seq),
    db.select({ refs: transcript.artifactRefsJson }).from(transcript).where(and(eq(transcript.eventId, job.event.event_id), eq(transcript.runId, job.runId))),
  ]);
  const unauditedDrops = unauditedDropsOf(job, Number(counted?.drops ?? 0));
  const carried = new Set(items.flatMap((i) => parseJson<{ artifact_id?: unknown }[]>(i.refs, []).map((r) => r.artifact_id)));
  const ids = new Set<string>();
  for (const a of announced) {
    if (typeof a.artifactId === "string" && !carried.has(a.artifactId)) ids.add(a.artifactId);
  }
  if (ids.size === 0) return { item: null, unauditedDrops };
  const refs = new RunArtifactRefs(db, artifactReaderOf(job));
  await refs.check([...ids]);
  const artifactRefs = refs.resolve([...ids].map((artifact_id) => ({ artifact_id }) as ArtifactRef));
  if (artifactRefs.length === 0) return { item: null, unauditedDrops };
  const item: NewTranscriptItem = {
    transcriptId: newId("tr"),
    conversationKey: job.conversationKey,
    eventId: job.event.event_id,
    runId: job.runId,
    conversationId: job.conversation.conversation_id,
    threadId: job.conversation.thread_id,
    role: "assistant",
    itemType: "artifacts",
    artifactRefs,
  };
  return { item, unauditedDrops };
}

/**
 * Its drops past the cap, counted from the warnings its ledger holds (each drop's is written with its audit, in one
 * write, a part of a batch written apart included: ledger-writes.ts auditsOf): what the ledger holds of the run is
 * what was written of it, in the order the run's drops were admitted, so its first MAX_AUDITED_DROPS drops there are
 * the audited ones. `drops`: its warnings naming a result, but for those of a result of an unknown type (ignored, not
 * dropped: no audit).
 */
function unauditedDropsOf(job: Pick<RunJob, "runId" | "conversationKey" | "conversation" | "runner">, drops: number): HostRecord[] {
  return unauditedDropsRecord({ runId: job.runId, runnerId: job.runner.runnerId, place: placeOfRun(job) }, drops - MAX_AUDITED_DROPS);
}
