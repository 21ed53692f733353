-- Runner services, models, tools, MCP servers and knowledge bases get an updated_at, strictly later at each PUT, that a
-- PUT of what GET answered sends back: a copy read before another change is refused (409) instead of undoing it. Null
-- on the rows already there, and on rows the previous Worker, which never names the column, writes until the deploy:
-- their created_at stands for it. Nothing is rewritten: safe to apply before the deploy.
ALTER TABLE `runner_service` ADD `updated_at` integer;--> statement-breakpoint
ALTER TABLE `knowledge_base` ADD `updated_at` integer;--> statement-breakpoint
ALTER TABLE `mcp_server` ADD `updated_at` integer;--> statement-breakpoint
ALTER TABLE `model` ADD `updated_at` integer;--> statement-breakpoint
ALTER TABLE `tool` ADD `updated_at` integer;