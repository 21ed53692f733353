-- The state epoch of the agent that bound a run's event (0009): a repeat of the event that hands over a run which
-- never reached its conversation tells the agent as created then from another created since under its id, which
-- must not run it. '' for an agent without an epoch; null for runs recorded before this migration.
ALTER TABLE `run` ADD `agent_epoch` text;