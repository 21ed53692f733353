-- Full-text index over transcript content for history.search (PROTOCOL §8).
-- External content: the index stores no copy of the text, it reads it from
-- `transcript` by rowid. Triggers keep it in step with every write to the
-- transcript, whichever code path makes it. Queries always join back to the
-- transcript row and check its conversation key, so the index only narrows
-- candidates and never decides what a run may read.
-- After a VACUUM (which may renumber implicit rowids) rebuild it with:
--   INSERT INTO transcript_fts(transcript_fts) VALUES ('rebuild');
CREATE VIRTUAL TABLE `transcript_fts` USING fts5(
	`content`,
	content = 'transcript',
	content_rowid = 'rowid',
	tokenize = 'unicode61 remove_diacritics 2'
);
--> statement-breakpoint
CREATE TRIGGER `transcript_fts_after_insert` AFTER INSERT ON `transcript`
WHEN new.`content` IS NOT NULL
BEGIN
	INSERT INTO `transcript_fts` (rowid, `content`) VALUES (new.rowid, new.`content`);
END;
--> statement-breakpoint
CREATE TRIGGER `transcript_fts_after_delete` AFTER DELETE ON `transcript`
WHEN old.`content` IS NOT NULL
BEGIN
	INSERT INTO `transcript_fts` (`transcript_fts`, rowid, `content`) VALUES ('delete', old.rowid, old.`content`);
END;
--> statement-breakpoint
CREATE TRIGGER `transcript_fts_after_update` AFTER UPDATE OF `content` ON `transcript`
BEGIN
	INSERT INTO `transcript_fts` (`transcript_fts`, rowid, `content`) SELECT 'delete', old.rowid, old.`content` WHERE old.`content` IS NOT NULL;
	INSERT INTO `transcript_fts` (rowid, `content`) SELECT new.rowid, new.`content` WHERE new.`content` IS NOT NULL;
END;
--> statement-breakpoint
-- Index what was written before this migration.
INSERT INTO `transcript_fts` (`transcript_fts`) VALUES ('rebuild');
