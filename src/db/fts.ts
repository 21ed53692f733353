import { integer, real, sqliteTable, text } from "drizzle-orm/sqlite-core";

/**
 * The FTS5 index over transcript content, created by migration
 * 0002_transcript_fts (a virtual table with triggers, which drizzle-kit cannot
 * express). Declared here, outside schema.ts, so queries are typed while
 * drizzle-kit never tries to create it as a plain table.
 */
export const transcriptFts = sqliteTable("transcript_fts", {
  /** The transcript row's rowid. */
  rowid: integer("rowid").notNull(),
  /** Contentless: searchable, never readable back (the text is read from the transcript). */
  content: text("content"),
  /** One token per row naming its conversation: 'k' || hex(conversation_key). */
  scope: text("scope"),
  /** FTS5's hidden column named after the table: the left side of MATCH. */
  match: text("transcript_fts"),
  /** FTS5's hidden rank column: BM25 over content only (set by the migration), smaller is better. */
  rank: real("rank"),
});
