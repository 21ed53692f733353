import { asc, eq, inArray, lte, type SQL } from "drizzle-orm";
import { batchAll, type Db } from "../db/client";
import { insertWhere } from "../db/guarded";
import { artifact } from "../db/schema";
import { iso, parseJson } from "../lib/json";
import type { ArtifactRef } from "../protocol/common";
import type { ArtifactMetadata } from "../protocol/host-api-results";

export type ArtifactRow = typeof artifact.$inferSelect;
export type NewArtifactRow = typeof artifact.$inferInsert;

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

export function artifactsStore(db: Db) {
  return {
    get: (artifactId: string) => db.select().from(artifact).where(eq(artifact.artifactId, artifactId)).get(),

    /** Any number of ids (a runner's result chunk chooses how many): slices under SQLite's bound-parameter limit, one round trip. */
    async getMany(artifactIds: string[]): Promise<ArtifactRow[]> {
      const slices = [];
      for (let i = 0; i < artifactIds.length; i += IDS_PER_QUERY) slices.push(db.select().from(artifact).where(inArray(artifact.artifactId, artifactIds.slice(i, i + IDS_PER_QUERY))));
      if (slices.length === 0) return [];
      // Each item of the batch is a select of artifact rows.
      return (await batchAll(db, slices)).flat() as ArtifactRow[];
    },

    /** `guard` makes the insert conditional on an earlier statement of the same batch (see insertWhere). */
    insertStatement(row: NewArtifactRow, guard?: SQL) {
      return insertWhere(db, artifact, row, guard);
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

    deleteStatement(artifactIds: string[]) {
      return db.delete(artifact).where(inArray(artifact.artifactId, artifactIds));
    },
  };
}
