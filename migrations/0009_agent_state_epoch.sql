-- State belongs to the agent that wrote it: deleting an agent deletes its state (rows
-- written from now on carry agent_id), and an agent created again under a deleted
-- one's id starts with none (state_epoch, random per created agent, is part of
-- its state scope keys; agents created before this migration keep theirs).
ALTER TABLE `agent` ADD `state_epoch` text;--> statement-breakpoint
ALTER TABLE `runner_state` ADD `agent_id` text;--> statement-breakpoint
CREATE INDEX `runner_state_agent` ON `runner_state` (`agent_id`);