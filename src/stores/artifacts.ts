import { and, asc, eq, getTableColumns, gt, inArray, lt, lte, notExists, sql, type SQL } from "drizzle-orm";
import { alias } from "drizzle-orm/sqlite-core";
import { batchAll, type Db } from "../db/client";
import { insertWhere } from "../db/guarded";
import { artifact, eventLog } from "../db/schema";
import { iso, parseJson } from "../lib/json";
import type { ArtifactRef } from "../protocol/common";
import type { ArtifactMetadata } from "../protocol/host-api-results";
import type { ArtifactReader } from "../artifacts/policy";
import { artifactOfOtherAudience } from "./private-audience";
import { REPLACED_KEY } from "./recalled-files";

export type ArtifactRow = typeof artifact.$inferSelect;
export type NewArtifactRow = typeof artifact.$inferInsert;
/** A row as a run reads it: with whether it is private to another audience than the run's (stores/private-audience.ts). */
export type ReadArtifactRow = ArtifactRow & { otherAudience: boolean };

/** The §8 ArtifactMetadata view of a row. */
export function toArtifactMetadata(row: ArtifactRow): ArtifactMetadata {
  return {
    ...toArtifactRef(row),
    artifact_type: row.artifactType,
    sha256: row.sha256 ?? undefined,
    source: row.source,
    conversation_id: row.conversationId ?? undefined,
    run_id: row.runId ?? undefined,
    runner_id: row.runnerId ?? undefined,
    created_at: iso(row.createdAt)!,
    expires_at: iso(row.expiresAt),
    metadata: parseJson<Record<string, unknown>>(row.metadataJson, {}),
  };
}

/** The reference a runner or a transcript item carries: the stored facts, not what a caller claimed. */
export function toArtifactRef(row: Pick<ArtifactRow, "artifactId" | "artifactType" | "mimeType" | "name" | "sizeBytes">): ArtifactRef {
  return {
    artifact_id: row.artifactId,
    artifact_type: row.artifactType,
    mime_type: row.mimeType ?? undefined,
    name: row.name ?? undefined,
    size_bytes: row.sizeBytes ?? undefined,
  };
}

/** Ids bound in one `IN (…)` read: well under SQLite's 32,766 bound parameters. */
const IDS_PER_QUERY = 500;

/** Selects of any number of ids, sliced under SQLite's bound-parameter limit: one round trip. */
async function sliced<T>(db: Db, artifactIds: string[], select: (ids: string[]) => unknown): Promise<T[]> {
  const slices = [];
  for (let i = 0; i < artifactIds.length; i += IDS_PER_QUERY) slices.push(select(artifactIds.slice(i, i + IDS_PER_QUERY)));
  if (slices.length === 0) return [];
  // Each item of the batch is a select of the rows `select` reads.
  return (await batchAll(db, slices)).flat() as T[];
}

export function artifactsStore(db: Db) {
  return {
    get: (artifactId: string) => db.select().from(artifact).where(eq(artifact.artifactId, artifactId)).get(),

    /** Any number of ids (a runner's result chunk chooses how many), one round trip. */
    getMany: (artifactIds: string[]): Promise<ArtifactRow[]> => sliced(db, artifactIds, (ids) => db.select().from(artifact).where(inArray(artifact.artifactId, ids))),

    /** The rows of `artifactIds` as the run `reader` reads them (artifacts/policy.ts artifactAccess decides from the flag). */
    async readBy(artifactIds: string[], reader: ArtifactReader): Promise<ReadArtifactRow[]> {
      const other = sql<number>`${artifactOfOtherAudience(db, reader)}`;
      const rows = await sliced<ArtifactRow & { other: number }>(db, artifactIds, (ids) => db.select({ ...getTableColumns(artifact), other }).from(artifact).where(inArray(artifact.artifactId, ids)));
      return rows.map(({ other: flag, ...row }) => ({ ...row, otherAudience: Boolean(flag) }));
    },

    /** `guard` makes the insert conditional on an earlier statement of the same batch (see insertWhere). */
    insertStatement(row: NewArtifactRow, guard?: SQL) {
      return insertWhere(db, artifact, row, guard);
    },

    /**
     * Files a chat reply re-used (its replied message's, stored when the bot received that one) last as long as files
     * the reply brought itself would: until `expiresAt` (null: for good). Never shortened, nor revived once expired, nor
     * once their message is recalled (its expiry of them may be later than `now` when it came meanwhile: the recall's
     * mark on that message's row, written with it, tells), nor once an edit of their message replaced them (the mark
     * on their own row tells). `guard` as for insertStatement.
     */
    extendStatement(artifactIds: string[], expiresAt: number | null, now: number, guard: SQL) {
      const brought = alias(eventLog, "reused_file_event");
      const recalled = db
        .select({ one: sql`1` })
        .from(brought)
        .where(and(eq(brought.eventId, sql`json_extract(${artifact.metadataJson}, '$.event_id')`), sql`json_type(${brought.metadataJson}, '$.recalled') IS NOT NULL`));
      // Replaced by an edit of its message (recalled-files.ts), which its message's record does not tell as a recall does.
      const unreplaced = sql`json_type(${artifact.metadataJson}, ${`$.${REPLACED_KEY}`}) IS NULL`;
      const later = expiresAt === null ? undefined : lt(artifact.expiresAt, expiresAt);
      return db
        .update(artifact)
        .set({ expiresAt })
        .where(and(inArray(artifact.artifactId, artifactIds), gt(artifact.expiresAt, now), later, notExists(recalled), unreplaced, guard));
    },

    /** Oldest-expiring first, through the expiry index. */
    expired(now: number, limit: number) {
      return db
        .select({ artifactId: artifact.artifactId, r2Key: artifact.r2Key })
        .from(artifact)
        .where(lte(artifact.expiresAt, now))
        .orderBy(asc(artifact.expiresAt))
        .limit(limit)
        .all();
    },

    /**
     * Deletes those of `artifactIds` still expired at `now` and answers their blobs' keys: a reply may have moved one's
     * expiry forward since it was read as expired (extendStatement), and that one stays, blob and row.
     */
    deleteExpired(artifactIds: string[], now: number): Promise<{ r2Key: string }[]> {
      return db
        .delete(artifact)
        .where(and(inArray(artifact.artifactId, artifactIds), lte(artifact.expiresAt, now)))
        .returning({ r2Key: artifact.r2Key })
        .all();
    },
  };
}
