-- An operator may host thousands of agents and bots and hundreds of runner services. Each admin listing pages on
-- (created_at, id): read from an index, a page costs what the first does instead of a read and sort of the whole
-- table. Agents by runner: a runner service's refresh, move and DELETE, and the triggers of migrations 0008 and 0011
-- (a runner deleted, a manifest saved), read the agents on its runners only. Agents by scope: why an event went
-- unbound (src/stores/unbound-reason.ts) reads the agents of the event's scopes, not every agent.
CREATE INDEX `agent_created` ON `agent` (`created_at`,`agent_id`);--> statement-breakpoint
CREATE INDEX `agent_runner` ON `agent` (`runner_id`,`agent_id`);--> statement-breakpoint
CREATE INDEX `agent_scope` ON `agent` (`scope_type`,`scope_id`);--> statement-breakpoint
CREATE INDEX `bot_created` ON `bot` (`created_at`,`bot_id`);--> statement-breakpoint
CREATE INDEX `knowledge_base_created` ON `knowledge_base` (`created_at`,`kb_id`);--> statement-breakpoint
CREATE INDEX `model_created` ON `model` (`created_at`,`model_id`);--> statement-breakpoint
CREATE INDEX `runner_service_created` ON `runner_service` (`created_at`,`service_id`);