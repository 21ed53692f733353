-- A bot's runs and a workspace's, newest first: GET /v1/runs?bot_id= and ?workspace_id= read their page from these
-- indexes instead of walking every run newest first until the page is full (the whole table for a bot with few runs
-- among millions, or none), as 0023_run_agent does for ?agent_id=. Each costs a run's insert one more index entry.
-- Building them reads the run table once each, in this migration's transaction: about a second per million runs.
CREATE INDEX `run_bot` ON `run` (`bot_id`,`created_at`,`run_id`);--> statement-breakpoint
CREATE INDEX `run_workspace` ON `run` (`workspace_id`,`created_at`,`run_id`);