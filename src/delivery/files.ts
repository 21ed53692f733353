/**
 * The files of an answer, for its delivery: the artifacts a run announced
 * (`artifact.created`, attached to its next message as in the transcript)
 * and those its message's content elements name. Each is sent only if the
 * run could read it (PROTOCOL §8's rule for `artifact.read`): a runner can't
 * post another conversation's file by naming its id.
 */
import { artifactAccess } from "../artifacts/policy";
import type { Db } from "../db/client";
import type { MessageContent } from "../protocol/common";
import type { OutgoingFile } from "../platforms/types";
import { artifactsStore, type ArtifactRow } from "../stores/artifacts";
import type { RunJob } from "../run/job";

/** The artifact ids a message's content elements name (images by URL are not files the host holds). */
export function fileIdsOf(content: MessageContent): string[] {
  if (typeof content === "string") return [];
  return content.flatMap((el) => (el.type !== "text" && el.artifact_id ? [el.artifact_id] : []));
}

export type LoadedFile = { ok: true; file: OutgoingFile } | { ok: false; code: string; error: string };

export interface AnswerFileDeps {
  db: Db;
  artifacts: R2Bucket;
}

/** The stored rows of an answer's files, by id (one query for the whole answer). */
export async function answerFileRows(db: Db, ids: string[]): Promise<Map<string, ArtifactRow>> {
  return new Map((await artifactsStore(db).getMany(ids)).map((row) => [row.artifactId, row]));
}

/** One file's bytes, read only when the run may show it and the platform can take it. One at a time: memory holds one file. */
export async function loadAnswerFile(deps: AnswerFileDeps, job: RunJob, artifactId: string, row: ArtifactRow | undefined, maxBytes: number): Promise<LoadedFile> {
  const access = row ? artifactAccess(row, { conversationKey: job.conversationKey, runId: job.runId }, Date.now()) : "not_found";
  if (!row || access !== "granted") return { ok: false, code: "artifact_unavailable", error: `artifact ${artifactId} is not one this run may show (${access})` };
  if ((row.sizeBytes ?? 0) > maxBytes) return { ok: false, code: "file_too_large", error: `artifact ${artifactId} is ${row.sizeBytes} bytes; this platform takes at most ${maxBytes}` };
  const object = await deps.artifacts.get(row.r2Key);
  if (!object) return { ok: false, code: "artifact_unavailable", error: `artifact ${artifactId} has no stored bytes` };
  const bytes = new Uint8Array(await object.arrayBuffer());
  // The row's size is the runner's claim for an upload in progress; the bytes are the fact.
  if (bytes.length > maxBytes) return { ok: false, code: "file_too_large", error: `artifact ${artifactId} is ${bytes.length} bytes; this platform takes at most ${maxBytes}` };
  const mimeType = row.mimeType ?? "application/octet-stream";
  const image = row.artifactType === "image" || mimeType.startsWith("image/");
  return { ok: true, file: { name: row.name ?? artifactId, mimeType, kind: image ? "image" : "file", bytes } };
}
