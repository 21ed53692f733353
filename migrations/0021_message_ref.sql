-- A chat message's own id on its platform (Slack `ts`, Telegram and Lark `message_id`), as a recall or an edit names
-- it: the message's transcript item is marked recalled, or given its edited words, however long ago it was said
-- (src/stores/transcript-revision.ts). The index holds chat messages only, by bot and chat. Messages recorded before
-- this migration get theirs from the cron (src/retention/message-refs.ts), a bounded batch per statement: one UPDATE of
-- every chat message here would rewrite EventLog whole in this migration's one transaction, holding the write lock
-- (and the previous Worker's writes) for as long, which sqld ends after 5 s once a writer waits. Building the index
-- reads EventLog once and writes nothing: the column is null in every row.
ALTER TABLE `event_log` ADD `message_ref` text;--> statement-breakpoint
CREATE INDEX `event_log_message` ON `event_log` (`bot_id`,`conversation_id`,`message_ref`) WHERE `message_ref` IS NOT NULL;
