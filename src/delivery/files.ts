/**
 * The files of an answer, for its delivery: the artifacts a run announced
 * (`artifact.created`, attached to its next message as in the transcript)
 * and those its message's content elements name. Each is sent only if the
 * run could read it (PROTOCOL §8's rule for `artifact.read`): a runner can't
 * post another conversation's file by naming its id, nor one private to other
 * eyes than its answer's (README "Who sees what in a group chat").
 */
import { artifactAccess } from "../artifacts/policy";
import type { Db } from "../db/client";
import type { MessageContent } from "../protocol/common";
import type { OutgoingFile } from "../platforms/types";
import { artifactsStore, type ReadArtifactRow } from "../stores/artifacts";
import { artifactReaderOf, type RunJob } from "../run/job";
import { loggedError } from "../lib/describe-error";
import { deliveredFileName } from "./file-name";

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

/** The stored rows of an answer's files as its run reads them, by id (one query for the whole answer). */
async function answerFileRows(db: Db, job: RunJob, ids: string[]): Promise<Map<string, ReadArtifactRow>> {
  return new Map((await artifactsStore(db).readBy(ids, artifactReaderOf(job))).map((row) => [row.artifactId, row]));
}

/**
 * One file, when the run may show it and the platform can take it. Its bytes are streamed to the platform from
 * storage on each attempt, never held whole in memory.
 */
export async function loadAnswerFile(deps: AnswerFileDeps, job: RunJob, artifactId: string, row: ReadArtifactRow | undefined, maxBytes: number): Promise<LoadedFile> {
  const access = row ? artifactAccess(row, { conversationKey: job.conversationKey, runId: job.runId }, Date.now()) : "not_found";
  if (!row || access !== "granted") return { ok: false, code: "artifact_unavailable", error: `artifact ${artifactId} is not one this run may show (${access})` };
  // A target that takes no file at all (0: a Slack answer only one user sees) refuses even an empty one.
  const tooLarge = (size: number) =>
    ({ ok: false, code: "file_too_large", error: maxBytes === 0 ? `artifact ${artifactId} not sent: this reply's target takes no files` : `artifact ${artifactId} is ${size} bytes; this platform takes at most ${maxBytes}` }) as const;
  if (maxBytes === 0 || (row.sizeBytes ?? 0) > maxBytes) return tooLarge(row.sizeBytes ?? 0);
  // The row's size is the runner's claim for an upload in progress; the stored object is the fact.
  const stored = await deps.artifacts.head(row.r2Key);
  if (!stored) return { ok: false, code: "artifact_unavailable", error: `artifact ${artifactId} has no stored bytes` };
  if (stored.size > maxBytes) return tooLarge(stored.size);
  const mimeType = row.mimeType ?? "application/octet-stream";
  const image = row.artifactType === "image" || mimeType.toLowerCase().startsWith("image/");
  const open = async () => {
    // Stored artifacts are never rewritten; the etag makes sure a retry streams the same bytes the size was read from.
    const object = await deps.artifacts.get(row.r2Key, { onlyIf: { etagMatches: stored.etag } });
    if (!object || !("body" in object)) throw new Error(`artifact ${artifactId} is no longer stored as it was`);
    return object.body;
  };
  return { ok: true, file: { name: deliveredFileName(row.name, artifactId, row.mimeType), mimeType, kind: image ? "image" : "file", size: stored.size, open } };
}

/**
 * An answer's files in order, each loaded (or why it cannot be sent), looked
 * up in one query; a failed lookup or read makes that file unavailable, not
 * the answer.
 */
export async function* answerFiles(deps: AnswerFileDeps, job: RunJob, ids: string[], maxBytes: number): AsyncGenerator<{ artifactId: string; loaded: LoadedFile }> {
  // What failed goes to the delivery trail, which the conversation's runners read (event.page); the cause (a statement,
  // the database's or the bucket's reason) to the log only.
  const logCause = (what: string, err: Error) => console.error(`run ${job.runId}: an answer's file ${what}: ${loggedError(err)}`);
  const rows = await answerFileRows(deps.db, job, ids).catch((err: Error) => {
    logCause("lookup failed", err);
    return err;
  });
  for (const artifactId of ids) {
    const loaded: LoadedFile =
      rows instanceof Error
        ? { ok: false, code: "artifact_unavailable", error: `artifact ${artifactId} could not be looked up: the database failed or did not answer` }
        : await loadAnswerFile(deps, job, artifactId, rows.get(artifactId), maxBytes).catch(
            (err: Error): LoadedFile => {
              logCause(`${artifactId} could not be read`, err);
              return { ok: false, code: "artifact_unavailable", error: `artifact ${artifactId} could not be read from storage` };
            },
          );
    yield { artifactId, loaded };
  }
}
