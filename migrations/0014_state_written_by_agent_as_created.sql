-- A state row of an agent that no longer exists is not written (0012). But 0012 asked only whether an agent of
-- that id exists: once another agent was created under a deleted one's id (a new state epoch, 0009), what the
-- deleted agent's runs still wrote (a state.set, a state.updated result, the conversation seed of a queued run)
-- was kept, under the old epoch's scope keys and the new agent's id: readable by no agent, kept while the new
-- one lives. Rows now carry the writing agent's epoch, and only the agent as created is written for. A row
-- without an epoch (an agent created before 0009, or the previous Worker until the deploy) is checked as 0012 did.
ALTER TABLE `runner_state` ADD `agent_epoch` text;--> statement-breakpoint
DROP TRIGGER IF EXISTS `runner_state_agent_exists`;--> statement-breakpoint
CREATE TRIGGER `runner_state_agent_exists` BEFORE INSERT ON `runner_state`
WHEN new.`agent_id` IS NOT NULL AND NOT EXISTS (SELECT 1 FROM `agent` WHERE `agent_id` = new.`agent_id` AND (new.`agent_epoch` IS NULL OR `state_epoch` = new.`agent_epoch`))
BEGIN
	SELECT RAISE(IGNORE);
END;
