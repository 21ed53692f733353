CREATE TABLE `bot` (
	`bot_id` text PRIMARY KEY NOT NULL,
	`platform` text NOT NULL,
	`name` text,
	`workspace_id` text,
	`api_base_url` text,
	`credentials_json` text NOT NULL,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL
);
