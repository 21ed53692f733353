-- A chat whose events continue another chat's conversation, per bot: a Telegram group upgraded to a supergroup gets a
-- new chat id, and the supergroup's events are recorded in the group's conversation, with its history and state
-- (src/stores/chat-moves.ts). Written when the host learns of the upgrade (Telegram's service messages, or a send to
-- the group refused with `migrate_to_chat_id`); read by key at ingress, for supergroups only, and kept per isolate.
CREATE TABLE `chat_alias` (
	`bot_id` text NOT NULL,
	`chat_id` text NOT NULL,
	`conversation_id` text NOT NULL,
	`created_at` integer NOT NULL,
	PRIMARY KEY(`bot_id`, `chat_id`)
);
