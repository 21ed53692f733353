CREATE TABLE `agent` (
	`agent_id` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`description` text,
	`runner_id` text NOT NULL,
	`runner_config_json` text DEFAULT '{}' NOT NULL,
	`event_types_json` text NOT NULL,
	`scope_type` text NOT NULL,
	`scope_id` text NOT NULL,
	`resource_policy_json` text DEFAULT '{}' NOT NULL,
	`state_policy_json` text DEFAULT '{}' NOT NULL,
	`delivery_policy_json` text DEFAULT '{}' NOT NULL,
	`concurrency_json` text DEFAULT '{}' NOT NULL,
	`enabled` integer NOT NULL,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `agent_binding` (
	`scope_type` text NOT NULL,
	`scope_id` text NOT NULL,
	`event_type` text NOT NULL,
	`agent_id` text NOT NULL,
	PRIMARY KEY(`scope_type`, `scope_id`, `event_type`)
);
--> statement-breakpoint
CREATE INDEX `agent_binding_agent` ON `agent_binding` (`agent_id`);--> statement-breakpoint
CREATE TABLE `artifact` (
	`artifact_id` text PRIMARY KEY NOT NULL,
	`artifact_type` text NOT NULL,
	`mime_type` text,
	`name` text,
	`size_bytes` integer,
	`sha256` text,
	`source` text NOT NULL,
	`conversation_key` text,
	`conversation_id` text,
	`run_id` text,
	`runner_id` text,
	`r2_key` text NOT NULL,
	`metadata_json` text DEFAULT '{}' NOT NULL,
	`created_at` integer NOT NULL,
	`expires_at` integer
);
--> statement-breakpoint
CREATE INDEX `artifact_run` ON `artifact` (`run_id`);--> statement-breakpoint
CREATE INDEX `artifact_expiry` ON `artifact` (`expires_at`);--> statement-breakpoint
CREATE TABLE `event_log` (
	`seq` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`event_id` text NOT NULL,
	`event_type` text NOT NULL,
	`event_time` text,
	`source` text NOT NULL,
	`source_event_type` text,
	`workspace_id` text,
	`bot_id` text,
	`conversation_key` text,
	`conversation_id` text,
	`thread_id` text,
	`actor_type` text,
	`actor_id` text,
	`actor_name` text,
	`subject_type` text,
	`subject_id` text,
	`input_json` text,
	`input_summary` text,
	`data_json` text DEFAULT '{}' NOT NULL,
	`raw_ref` text,
	`run_id` text,
	`agent_id` text,
	`disposition` text,
	`accept_id` text,
	`metadata_json` text DEFAULT '{}' NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `event_log_event_id` ON `event_log` (`event_id`);--> statement-breakpoint
CREATE INDEX `event_log_conversation` ON `event_log` (`conversation_key`,`seq`);--> statement-breakpoint
CREATE TABLE `run` (
	`run_id` text PRIMARY KEY NOT NULL,
	`event_id` text NOT NULL,
	`conversation_key` text NOT NULL,
	`conversation_id` text,
	`thread_id` text,
	`workspace_id` text,
	`bot_id` text,
	`agent_id` text NOT NULL,
	`runner_id` text NOT NULL,
	`status` text NOT NULL,
	`finish_reason` text,
	`final_message_json` text,
	`error_code` text,
	`error_message` text,
	`result_count` integer DEFAULT 0 NOT NULL,
	`created_at` integer NOT NULL,
	`started_at` integer,
	`ended_at` integer
);
--> statement-breakpoint
CREATE INDEX `run_conversation` ON `run` (`conversation_key`,`created_at`);--> statement-breakpoint
CREATE INDEX `run_status` ON `run` (`status`);--> statement-breakpoint
CREATE TABLE `run_event` (
	`run_id` text NOT NULL,
	`seq` integer NOT NULL,
	`type` text NOT NULL,
	`data_json` text NOT NULL,
	`runner_sequence` integer,
	`origin` text NOT NULL,
	`created_at` integer NOT NULL,
	PRIMARY KEY(`run_id`, `seq`)
);
--> statement-breakpoint
CREATE TABLE `runner` (
	`runner_id` text PRIMARY KEY NOT NULL,
	`service_id` text NOT NULL,
	`name` text NOT NULL,
	`manifest_json` text NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `runner_by_service` ON `runner` (`service_id`);--> statement-breakpoint
CREATE TABLE `runner_service` (
	`service_id` text PRIMARY KEY NOT NULL,
	`base_url` text NOT NULL,
	`secret` text,
	`author` text,
	`name` text,
	`version` text,
	`manifest_json` text,
	`last_error` text,
	`fetched_at` integer,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `runner_service_base_url` ON `runner_service` (`base_url`);--> statement-breakpoint
CREATE TABLE `runner_state` (
	`scope_key` text NOT NULL,
	`key` text NOT NULL,
	`runner_id` text NOT NULL,
	`scope` text NOT NULL,
	`value_json` text NOT NULL,
	`updated_at` integer NOT NULL,
	PRIMARY KEY(`scope_key`, `key`)
);
--> statement-breakpoint
CREATE TABLE `storage` (
	`area` text NOT NULL,
	`owner_key` text NOT NULL,
	`key` text NOT NULL,
	`value_base64` text NOT NULL,
	`updated_at` integer NOT NULL,
	PRIMARY KEY(`area`, `owner_key`, `key`)
);
--> statement-breakpoint
CREATE TABLE `transcript` (
	`transcript_id` text PRIMARY KEY NOT NULL,
	`conversation_key` text NOT NULL,
	`seq` integer NOT NULL,
	`event_id` text NOT NULL,
	`run_id` text,
	`conversation_id` text,
	`thread_id` text,
	`role` text NOT NULL,
	`item_type` text NOT NULL,
	`content` text,
	`content_json` text,
	`artifact_refs_json` text DEFAULT '[]' NOT NULL,
	`metadata_json` text DEFAULT '{}' NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `transcript_conversation_seq` ON `transcript` (`conversation_key`,`seq`);--> statement-breakpoint
CREATE INDEX `transcript_event` ON `transcript` (`event_id`);