-- Deleting an agent deletes the state it wrote (0009). A run of that agent
-- still in flight when it was deleted kept writing (a state.set, a
-- state.updated result, the conversation seed), and those rows were left for
-- good: readable by no agent, deleted by nothing. A state row of an agent that
-- no longer exists is now not written at all (IGNORE, not ABORT: the rest of
-- the run's batch, its transcript and ledger, is still written). Rows written
-- before 0009 have no agent_id and are left alone.
CREATE TRIGGER `runner_state_agent_exists` BEFORE INSERT ON `runner_state`
WHEN new.`agent_id` IS NOT NULL AND NOT EXISTS (SELECT 1 FROM `agent` WHERE `agent_id` = new.`agent_id`)
BEGIN
	SELECT RAISE(IGNORE);
END;
