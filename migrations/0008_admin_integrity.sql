-- The admin routes check that an agent's runner is registered, that a runner
-- an agent runs on is not dropped, and that a binding names an agent; a
-- concurrent write can come between such a check and the write it guards
-- (an agent created while its service is deleted, a PUT racing a DELETE).
-- These triggers make the database refuse the write itself, so no agent is
-- ever left on a runner that does not exist and no binding names no agent.
-- The routes turn the refusals into 409 / 404 answers.
CREATE TRIGGER `agent_runner_registered_on_insert` BEFORE INSERT ON `agent`
WHEN NOT EXISTS (SELECT 1 FROM `runner` WHERE `runner_id` = new.`runner_id`)
BEGIN
	SELECT RAISE(ABORT, 'integrity: agent_runner_not_registered');
END;
--> statement-breakpoint
CREATE TRIGGER `agent_runner_registered_on_update` BEFORE UPDATE OF `runner_id` ON `agent`
WHEN NOT EXISTS (SELECT 1 FROM `runner` WHERE `runner_id` = new.`runner_id`)
BEGIN
	SELECT RAISE(ABORT, 'integrity: agent_runner_not_registered');
END;
--> statement-breakpoint
CREATE TRIGGER `runner_unused_on_delete` BEFORE DELETE ON `runner`
WHEN EXISTS (SELECT 1 FROM `agent` WHERE `runner_id` = old.`runner_id`)
BEGIN
	SELECT RAISE(ABORT, 'integrity: runner_in_use');
END;
--> statement-breakpoint
CREATE TRIGGER `agent_binding_agent_exists` BEFORE INSERT ON `agent_binding`
WHEN NOT EXISTS (SELECT 1 FROM `agent` WHERE `agent_id` = new.`agent_id`)
BEGIN
	SELECT RAISE(ABORT, 'integrity: binding_agent_missing');
END;
