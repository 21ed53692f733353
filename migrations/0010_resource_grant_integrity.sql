-- The admin routes check that an agent's resource_policy grants only
-- registered models, tools and knowledge bases, and that a resource an agent
-- grants is not deleted; a concurrent write can come between such a check and
-- the write it guards (a model deleted while an agent granting it is saved).
-- As 0008 does for runners, these triggers make the database refuse the write
-- itself, so no agent is left granting a resource that does not exist. The
-- routes turn the refusals into 409 answers.
CREATE TRIGGER `agent_grants_registered_on_insert` BEFORE INSERT ON `agent`
WHEN EXISTS (SELECT 1 FROM json_each(new.`resource_policy_json`, '$.models') AS g WHERE NOT EXISTS (SELECT 1 FROM `model` WHERE `model_id` = g.value))
  OR EXISTS (SELECT 1 FROM json_each(new.`resource_policy_json`, '$.fallback_models') AS g WHERE NOT EXISTS (SELECT 1 FROM `model` WHERE `model_id` = g.value))
  OR EXISTS (SELECT 1 FROM json_each(new.`resource_policy_json`, '$.tools') AS g WHERE NOT EXISTS (SELECT 1 FROM `tool` WHERE `tool_name` = g.value))
  OR EXISTS (SELECT 1 FROM json_each(new.`resource_policy_json`, '$.knowledge_bases') AS g WHERE NOT EXISTS (SELECT 1 FROM `knowledge_base` WHERE `kb_id` = g.value))
BEGIN
	SELECT RAISE(ABORT, 'integrity: agent_grant_not_registered');
END;
--> statement-breakpoint
CREATE TRIGGER `agent_grants_registered_on_update` BEFORE UPDATE OF `resource_policy_json` ON `agent`
WHEN EXISTS (SELECT 1 FROM json_each(new.`resource_policy_json`, '$.models') AS g WHERE NOT EXISTS (SELECT 1 FROM `model` WHERE `model_id` = g.value))
  OR EXISTS (SELECT 1 FROM json_each(new.`resource_policy_json`, '$.fallback_models') AS g WHERE NOT EXISTS (SELECT 1 FROM `model` WHERE `model_id` = g.value))
  OR EXISTS (SELECT 1 FROM json_each(new.`resource_policy_json`, '$.tools') AS g WHERE NOT EXISTS (SELECT 1 FROM `tool` WHERE `tool_name` = g.value))
  OR EXISTS (SELECT 1 FROM json_each(new.`resource_policy_json`, '$.knowledge_bases') AS g WHERE NOT EXISTS (SELECT 1 FROM `knowledge_base` WHERE `kb_id` = g.value))
BEGIN
	SELECT RAISE(ABORT, 'integrity: agent_grant_not_registered');
END;
--> statement-breakpoint
CREATE TRIGGER `model_ungranted_on_delete` BEFORE DELETE ON `model`
WHEN EXISTS (SELECT 1 FROM `agent`, json_each(`agent`.`resource_policy_json`, '$.models') AS g WHERE g.value = old.`model_id`)
  OR EXISTS (SELECT 1 FROM `agent`, json_each(`agent`.`resource_policy_json`, '$.fallback_models') AS g WHERE g.value = old.`model_id`)
BEGIN
	SELECT RAISE(ABORT, 'integrity: resource_granted');
END;
--> statement-breakpoint
CREATE TRIGGER `tool_ungranted_on_delete` BEFORE DELETE ON `tool`
WHEN EXISTS (SELECT 1 FROM `agent`, json_each(`agent`.`resource_policy_json`, '$.tools') AS g WHERE g.value = old.`tool_name`)
BEGIN
	SELECT RAISE(ABORT, 'integrity: resource_granted');
END;
--> statement-breakpoint
CREATE TRIGGER `knowledge_base_ungranted_on_delete` BEFORE DELETE ON `knowledge_base`
WHEN EXISTS (SELECT 1 FROM `agent`, json_each(`agent`.`resource_policy_json`, '$.knowledge_bases') AS g WHERE g.value = old.`kb_id`)
BEGIN
	SELECT RAISE(ABORT, 'integrity: resource_granted');
END;
