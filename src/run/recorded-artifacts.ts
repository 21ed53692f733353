import { and, desc, eq, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { runEvent, transcript } from "../db/schema";
import { parseJson } from "../lib/json";
import { newId } from "../lib/ids";
import type { ArtifactRef } from "../protocol/common";
import type { NewTranscriptItem } from "../stores/transcript";
import { RunArtifactRefs } from "./artifact-refs";
import { artifactReaderOf, type RunJob } from "./job";

/**
 * The item of artifacts (README, Artifacts) a run the host ends owes its transcript, rebuilt from what its ledger
 * recorded, as ResultProcessor would have made it had the run ended while its instance lived: the artifacts announced
 * after the last runner result that made a transcript message (a message.completed). Left out: results the host
 * dropped (its host.warning names their `ledger_seq`), artifacts the run may not attach (the stored facts are written,
 * as for any ref), and any an item of the run carries already. Null when none is left. One round trip.
 */
export async function recordedTrailingArtifacts(db: Db, job: Pick<RunJob, "runId" | "conversationKey" | "conversation" | "event" | "delivery">): Promise<NewTranscriptItem | null> {
  const e = runEvent;
  const of = (origin: "runner" | "host", type: string) => and(eq(e.runId, job.runId), eq(e.origin, origin), eq(e.type, type));
  const [warnings, messages, announced, items] = await db.batch([
    db.select({ ledgerSeq: sql<unknown>`json_extract(${e.dataJson}, '$.ledger_seq')` }).from(e).where(of("host", "host.warning")),
    db.select({ seq: e.seq }).from(e).where(of("runner", "message.completed")).orderBy(desc(e.seq)),
    // Only the id: inline content was stored under the id its entry names; the facts come from the artifact's row.
    db.select({ seq: e.seq, artifactId: sql<unknown>`json_extract(${e.dataJson}, '$.artifact_id')` }).from(e).where(of("runner", "artifact.created")).orderBy(e.seq),
    db.select({ refs: transcript.artifactRefsJson }).from(transcript).where(and(eq(transcript.eventId, job.event.event_id), eq(transcript.runId, job.runId))),
  ]);
  const dropped = new Set(warnings.map((w) => Number(w.ledgerSeq)).filter(Number.isInteger));
  const lastMessage = messages.find((m) => !dropped.has(m.seq))?.seq ?? 0;
  const carried = new Set(items.flatMap((i) => parseJson<{ artifact_id?: unknown }[]>(i.refs, []).map((r) => r.artifact_id)));
  const ids = new Set<string>();
  for (const a of announced) {
    if (a.seq > lastMessage && !dropped.has(a.seq) && typeof a.artifactId === "string" && !carried.has(a.artifactId)) ids.add(a.artifactId);
  }
  if (ids.size === 0) return null;
  const refs = new RunArtifactRefs(db, artifactReaderOf(job));
  await refs.check([...ids]);
  const artifactRefs = refs.resolve([...ids].map((artifact_id) => ({ artifact_id }) as ArtifactRef));
  if (artifactRefs.length === 0) return null;
  return {
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
}
