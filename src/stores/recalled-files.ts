import { and, eq, gt, inArray, isNull, notInArray, or, sql, type SQL } from "drizzle-orm";
import type { Db } from "../db/client";
import { loggedError } from "../lib/describe-error";
import { artifact, eventLog } from "../db/schema";
import { revisedMessageRow, type TranscriptRevision } from "./transcript-revision";

type Recalled = Pick<TranscriptRevision, "botId" | "registeredAt" | "conversationId" | "messageRef">;

/** The artifact metadata key naming a message's own file by its platform's lasting id (PlatformFile.uniqueId). */
export const PLATFORM_FILE_KEY = "platform_file_id";
/** The artifact metadata key marking a file an edit of its message replaced, and when: never revived by a reply re-using it. */
export const REPLACED_KEY = "replaced_at";

/**
 * The files a recalled message brought: the input artifacts ingress stored for it, named in its recorded input's
 * attachments (so by primary key, however many artifacts there are) and stored for its own event (never one of an
 * earlier message that an API event named again).
 */
function ofRecalledMessage(db: Db, r: Recalled) {
  const named = db
    .select({ id: sql`json_extract(att.value, '$.artifact_id')` })
    .from(eventLog)
    .innerJoin(sql`json_each(${eventLog.inputJson}, '$.attachments') AS att`, sql`1`)
    .where(revisedMessageRow(r));
  const message = db.select({ eventId: eventLog.eventId }).from(eventLog).where(revisedMessageRow(r));
  // Neither subquery names the artifact row: each is read once, and the artifacts by primary key.
  return and(inArray(artifact.artifactId, named), eq(artifact.source, "input"), inArray(sql`json_extract(${artifact.metadataJson}, '$.event_id')`, message))!;
}

/**
 * A recall's statements for the files its message brought (README "A message recalled or edited"): each expires now,
 * so every path a runner has to it refuses it as expired (`artifact.read` and `artifact.metadata` 404 `not_found`, a
 * model call naming it, an answer attaching it) and retention's sweep deletes its bytes and row; then their R2 keys,
 * for their bytes to go at once (deleteRecalledBytes). Sent again, the first changes nothing; the second reads them again.
 */
export function recalledFilesStatements(db: Db, r: Recalled, now: number) {
  return expiryStatements(db, ofRecalledMessage(db, r), now);
}

/**
 * An edit's statements for the files its message no longer has (a Telegram photo replaced): those stored for it under
 * a lasting id not among `kept` (MessageRevision.files) go as a recalled message's do. One stored without such an id
 * (before it was kept) cannot be told replaced: it stays.
 */
export function replacedFilesStatements(db: Db, r: Recalled, kept: string[], now: number) {
  return expiryStatements(db, replacedFiles(db, r, kept), now, REPLACED_KEY);
}

function replacedFiles(db: Db, r: Recalled, kept: string[]) {
  const fileId = sql`json_extract(${artifact.metadataJson}, ${`$.${PLATFORM_FILE_KEY}`})`;
  return and(ofRecalledMessage(db, r), sql`${fileId} IS NOT NULL`, kept.length ? notInArray(fileId, kept) : undefined)!;
}

/** The artifact ids of the files an edit replaced (replacedFilesStatements), as a subquery: its transcript item lists them no more. */
export const replacedArtifactIds = (db: Db, r: Recalled, kept: string[]) => db.select({ id: artifact.artifactId }).from(artifact).where(replacedFiles(db, r, kept));

/** `mark`: a metadata key set to when, which tells a file the same message's record does not (a reply re-using it: artifacts.ts extendStatement). */
function expiryStatements(db: Db, files: SQL, now: number, mark?: string) {
  const metadataJson = mark === undefined ? {} : { metadataJson: sql`json_set(${artifact.metadataJson}, ${`$.${mark}`}, ${new Date(now).toISOString()})` };
  return [
    db.update(artifact).set({ expiresAt: now, ...metadataJson }).where(and(files, or(isNull(artifact.expiresAt), gt(artifact.expiresAt, now)))),
    db.select({ r2Key: artifact.r2Key, artifactId: artifact.artifactId }).from(artifact).where(files),
  ] as const;
}

/**
 * The recalled files' bytes deleted from R2 now: the user's clear intent, not left for their TTL. Best effort: their
 * rows have expired already, so none is readable, and the retention sweep deletes what a failure here leaves.
 */
export async function deleteRecalledBytes(bucket: R2Bucket, keys: string[]): Promise<void> {
  if (keys.length === 0) return;
  await bucket.delete(keys).catch((err: unknown) => console.warn(`recalled files: ${keys.length} left for the retention sweep to delete (${loggedError(err)})`));
}
