-- history.search in scripts written without spaces (PROTOCOL §8). unicode61
-- splits words at spaces and punctuation only, so a Chinese, Japanese or
-- Thai sentence is one long token and a word inside it is never found. The
-- host writes `search_text` (src/stores/fts-query.ts): the content with each
-- character of such a script as a word of its own; queries are segmented the
-- same way and matched as phrases, so the characters must still be adjacent
-- and in order. It is NULL for content that needs none, and the index reads
-- the content then. Items written before this migration keep their index
-- entries as they were (whole words still match).
ALTER TABLE `transcript` ADD `search_text` text;
--> statement-breakpoint
DROP TRIGGER `transcript_fts_after_insert`;
--> statement-breakpoint
DROP TRIGGER `transcript_fts_after_update`;
--> statement-breakpoint
CREATE TRIGGER `transcript_fts_after_insert` AFTER INSERT ON `transcript`
WHEN new.`content` IS NOT NULL
BEGIN
	INSERT INTO `transcript_fts` (rowid, `content`, `scope`) VALUES (new.rowid, COALESCE(new.`search_text`, new.`content`), 'k' || hex(new.`conversation_key`));
END;
--> statement-breakpoint
CREATE TRIGGER `transcript_fts_after_update` AFTER UPDATE OF `content`, `search_text`, `conversation_key` ON `transcript`
BEGIN
	DELETE FROM `transcript_fts` WHERE rowid = old.rowid;
	INSERT INTO `transcript_fts` (rowid, `content`, `scope`) SELECT new.rowid, COALESCE(new.`search_text`, new.`content`), 'k' || hex(new.`conversation_key`) WHERE new.`content` IS NOT NULL;
END;
