-- A chat message's own id on its platform (Slack `ts`, Telegram and Lark `message_id`), as a recall or an edit names
-- it: the message's transcript item is marked recalled, or given its edited words, however long ago it was said
-- (src/stores/transcript-revision.ts). The index holds chat messages only, by bot and chat. Messages recorded before
-- this migration get theirs from their data. A Worker older than this migration never names the column: its
-- messages have none, and a recall or edit of one of them leaves its transcript item as it was.
ALTER TABLE `event_log` ADD `message_ref` text;--> statement-breakpoint
UPDATE `event_log` SET `message_ref` = CAST(json_extract(`data_json`, CASE `source` WHEN 'slack' THEN '$.ts' ELSE '$.message_id' END) AS TEXT)
WHERE `event_type` = 'message.received' AND `source` IN ('slack', 'telegram', 'lark');--> statement-breakpoint
CREATE INDEX `event_log_message` ON `event_log` (`bot_id`,`conversation_id`,`message_ref`) WHERE `message_ref` IS NOT NULL;
