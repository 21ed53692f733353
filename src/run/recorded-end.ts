import { and, eq, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { runEvent, transcript } from "../db/schema";
import { parseJson } from "../lib/json";
import { newId } from "../lib/ids";
import type { ArtifactRef } from "../protocol/common";
import type { NewTranscriptItem } from "../stores/transcript";
import { RunArtifactRefs } from "./artifact-refs";
import { artifactReaderOf, type RunJob } from "./job";

/** What a run the host ends owes its records beyond its end, rebuilt from its ledger. */
export interface RecordedEnd {
  /** The item of the artifacts it announced after its last message; null when none is left. */
  item: NewTranscriptItem | null;
}

/**
 * What a run the host ends owes its records: the item of artifacts (README, Artifacts) its transcript is owed, rebuilt from what its ledger
 * recorded, as ResultProcessor would have made it had the run ended while its instance lived: the artifacts announced
 * after the last runner result that made a transcript message (a message.completed). Left out: results the host
 * dropped (its host.warning names their `ledger_seq`), artifacts the run may not attach (the stored facts are written,
 * as for any ref), and any an item of the run carries already. (The count of its drops no audit recorded is the end's
 * own write's: drop-records.ts.) One round trip (two with artifacts to check), reading a bounded number of rows: a
 * runner flooding invalid results leaves a warning each (hundreds of thousands within its stream's limit), matched in
 * the database.
 */
export async function recordedEnd(db: Db, job: Pick<RunJob, "runId" | "conversationKey" | "conversation" | "event" | "delivery" | "runner">): Promise<RecordedEnd> {
  const e = runEvent;
  const of = (origin: "runner" | "host", type: string) => and(eq(e.runId, job.runId), eq(e.origin, origin), eq(e.type, type));
  const namesResult = sql`json_type(${e.dataJson}, '$.ledger_seq') = 'integer'`;
  // The results the host dropped (or ignored, of an unknown type): each named by a warning. Uncorrelated, so built once
  // per statement; its columns name the subquery's own table.
  const dropped = sql`(SELECT json_extract(${e.dataJson}, '$.ledger_seq') FROM ${e} WHERE ${and(of("host", "host.warning"), namesResult)})`;
  const lastMessage = sql`(SELECT COALESCE(MAX(${e.seq}), 0) FROM ${e} WHERE ${and(of("runner", "message.completed"), sql`${e.seq} NOT IN ${dropped}`)})`;
  const [announced, items] = await db.batch([
    // Only the id: inline content was stored under the id its entry names; the facts come from the artifact's row. At
    // most the run's RUN_MAX_ARTIFACTS: past it, each is dropped.
    db
      .select({ seq: e.seq, artifactId: sql<unknown>`json_extract(${e.dataJson}, '$.artifact_id')` })
      .from(e)
      .where(and(of("runner", "artifact.created"), sql`${e.seq} > ${lastMessage}`, sql`${e.seq} NOT IN ${dropped}`))
      .orderBy(e.seq),
    db.select({ refs: transcript.artifactRefsJson }).from(transcript).where(and(eq(transcript.eventId, job.event.event_id), eq(transcript.runId, job.runId))),
  ]);
  const carried = new Set(items.flatMap((i) => parseJson<{ artifact_id?: unknown }[]>(i.refs, []).map((r) => r.artifact_id)));
  const ids = new Set<string>();
  for (const a of announced) {
    if (typeof a.artifactId === "string" && !carried.has(a.artifactId)) ids.add(a.artifactId);
  }
  if (ids.size === 0) return { item: null };
  const refs = new RunArtifactRefs(db, artifactReaderOf(job));
  await refs.check([...ids]);
  const artifactRefs = refs.resolve([...ids].map((artifact_id) => ({ artifact_id }) as ArtifactRef));
  if (artifactRefs.length === 0) return { item: null };
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
  return { item };
}

