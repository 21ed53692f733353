/** Artifacts: the metadata rows of blobs kept in R2. */
import { index, integer, sqliteTable, text } from "drizzle-orm/sqlite-core";

/** Artifact metadata; blobs live in R2 under `r2_key`. */
export const artifact = sqliteTable(
  "artifact",
  {
    artifactId: text("artifact_id").primaryKey(),
    artifactType: text("artifact_type").notNull(),
    mimeType: text("mime_type"),
    name: text("name"),
    sizeBytes: integer("size_bytes"),
    sha256: text("sha256"),
    source: text("source").notNull(),
    conversationKey: text("conversation_key"),
    conversationId: text("conversation_id"),
    runId: text("run_id"),
    runnerId: text("runner_id"),
    r2Key: text("r2_key").notNull(),
    metadataJson: text("metadata_json").notNull().default("{}"),
    createdAt: integer("created_at").notNull(),
    expiresAt: integer("expires_at"),
  },
  (t) => [index("artifact_run").on(t.runId), index("artifact_expiry").on(t.expiresAt)],
);
