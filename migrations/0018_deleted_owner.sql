-- Deleting an agent deleted all the state it wrote, and deleting a runner service all its plugin storage, in the
-- DELETE's own batch: one statement over every row, holding the database's write lock (every conversation's writes
-- wait) for as long as a year of state takes. The DELETE now notes what it leaves here, and retention deletes it in
-- bounded batches. The index by agent and epoch lets it take one deleted agent's rows without walking those of an
-- agent created since under the same id.
CREATE TABLE `deleted_owner` (
	`seq` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`kind` text NOT NULL,
	`owner_id` text NOT NULL,
	`epoch` text,
	`deleted_at` integer NOT NULL
);
--> statement-breakpoint
CREATE INDEX `deleted_owner_kind` ON `deleted_owner` (`kind`,`seq`);--> statement-breakpoint
DROP INDEX `runner_state_agent`;--> statement-breakpoint
CREATE INDEX `runner_state_agent_epoch` ON `runner_state` (`agent_id`,`agent_epoch`);