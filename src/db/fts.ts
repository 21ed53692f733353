import { integer, real, sqliteTable, text } from "drizzle-orm/sqlite-core";

/**
 * The FTS5 index over transcript content, created by migration
 * 0002_transcript_fts (a virtual table with triggers, which drizzle-kit cannot
 * express). Declared here, outside schema.ts, so queries are typed while
 * drizzle-kit never tries to create it as a plain table.
 */
export const transcriptFts = sqliteTable("transcript_fts", {
  /** The transcript row's rowid (external content). */
  rowid: integer("rowid").notNull(),
  content: text("content"),
  /** FTS5's hidden column named after the table: the left side of MATCH. */
  match: text("transcript_fts"),
  /** FTS5's hidden rank column: BM25, smaller is a better match. */
  rank: real("rank"),
});
