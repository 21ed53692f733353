-- Full-text index over transcript content for history.search (PROTOCOL §8).
--
-- Contentless (the text stays in `transcript` only; contentless_delete lets
-- the triggers remove rows), keyed by the transcript row's rowid. Besides the
-- content it indexes one `scope` token per row, 'k' || hex(conversation_key):
-- a search ANDs it with the user's terms, so FTS5 intersects the term's
-- postings with the conversation's instead of walking every conversation's
-- matches. Queries still check the conversation key on the transcript row
-- they join, so the index only narrows candidates, never decides access.
-- Ranking is BM25 on content only: the scope column weighs nothing.
--
-- The triggers keep it in step with every write to the transcript, whichever
-- code path makes it. After a VACUUM (which may renumber implicit rowids)
-- rebuild it: INSERT INTO transcript_fts(transcript_fts) VALUES ('delete-all');
-- then the INSERT ... SELECT at the end of this file.
CREATE VIRTUAL TABLE `transcript_fts` USING fts5(
	`content`,
	`scope`,
	content = '',
	contentless_delete = 1,
	tokenize = 'unicode61 remove_diacritics 2'
);
--> statement-breakpoint
INSERT INTO `transcript_fts` (`transcript_fts`, rank) VALUES ('rank', 'bm25(1.0, 0.0)');
--> statement-breakpoint
CREATE TRIGGER `transcript_fts_after_insert` AFTER INSERT ON `transcript`
WHEN new.`content` IS NOT NULL
BEGIN
	INSERT INTO `transcript_fts` (rowid, `content`, `scope`) VALUES (new.rowid, new.`content`, 'k' || hex(new.`conversation_key`));
END;
--> statement-breakpoint
CREATE TRIGGER `transcript_fts_after_delete` AFTER DELETE ON `transcript`
BEGIN
	DELETE FROM `transcript_fts` WHERE rowid = old.rowid;
END;
--> statement-breakpoint
CREATE TRIGGER `transcript_fts_after_update` AFTER UPDATE OF `content`, `conversation_key` ON `transcript`
BEGIN
	DELETE FROM `transcript_fts` WHERE rowid = old.rowid;
	INSERT INTO `transcript_fts` (rowid, `content`, `scope`) SELECT new.rowid, new.`content`, 'k' || hex(new.`conversation_key`) WHERE new.`content` IS NOT NULL;
END;
--> statement-breakpoint
-- Index what was written before this migration.
INSERT INTO `transcript_fts` (rowid, `content`, `scope`)
SELECT rowid, `content`, 'k' || hex(`conversation_key`) FROM `transcript` WHERE `content` IS NOT NULL;
