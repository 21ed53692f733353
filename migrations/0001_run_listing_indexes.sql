DROP INDEX `run_status`;--> statement-breakpoint
CREATE INDEX `run_conversation_id` ON `run` (`conversation_id`,`created_at`,`run_id`);--> statement-breakpoint
CREATE INDEX `run_created` ON `run` (`created_at`,`run_id`);--> statement-breakpoint
CREATE INDEX `run_status` ON `run` (`status`,`created_at`,`run_id`);