CREATE TABLE `knowledge_base` (
	`kb_id` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`description` text,
	`endpoint` text NOT NULL,
	`api_key` text,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `mcp_server` (
	`name` text PRIMARY KEY NOT NULL,
	`url` text NOT NULL,
	`headers_json` text DEFAULT '{}' NOT NULL,
	`discovered_at` integer NOT NULL,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `model` (
	`model_id` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`kind` text NOT NULL,
	`base_url` text NOT NULL,
	`api_key` text NOT NULL,
	`provider_model` text NOT NULL,
	`context_window` integer,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `tool` (
	`tool_name` text PRIMARY KEY NOT NULL,
	`description` text DEFAULT '' NOT NULL,
	`parameters_json` text DEFAULT '{}' NOT NULL,
	`endpoint` text,
	`headers_json` text,
	`mcp_server` text,
	`mcp_tool_name` text,
	`created_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `tool_by_mcp_server` ON `tool` (`mcp_server`);