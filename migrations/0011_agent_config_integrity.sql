-- The admin routes check an agent's runner_config against its runner's
-- config_schema (every required field without a default given, not null), and
-- a runner service refresh checks the new manifest against the agents bound to
-- it; an agent saved while the manifest is refreshed can pass both checks and
-- be left without a field its runner now requires. As 0008 and 0010 do, these
-- triggers make the database refuse such a write itself; the routes answer 409.
-- A write only refuses what it would break: an agent that already lacked a field
-- (saved by an earlier release) can still have its values resealed, and its
-- service refreshed with a manifest that requires nothing new.
CREATE TRIGGER `agent_config_complete_on_insert` BEFORE INSERT ON `agent`
WHEN EXISTS (
  SELECT 1 FROM `runner` AS r, json_each(r.`manifest_json`, '$.config_schema') AS f
  WHERE r.`runner_id` = new.`runner_id`
    AND json_extract(f.value, '$.required') = 1
    AND coalesce(json_type(f.value, '$.default'), 'null') = 'null'
    AND NOT EXISTS (SELECT 1 FROM json_each(new.`runner_config_json`) AS c WHERE c.key = json_extract(f.value, '$.name') AND c.type != 'null')
)
BEGIN
	SELECT RAISE(ABORT, 'integrity: agent_config_incomplete');
END;
--> statement-breakpoint
CREATE TRIGGER `agent_config_complete_on_update` BEFORE UPDATE OF `runner_id`, `runner_config_json` ON `agent`
WHEN EXISTS (
  SELECT 1 FROM `runner` AS r, json_each(r.`manifest_json`, '$.config_schema') AS f
  WHERE r.`runner_id` = new.`runner_id`
    AND json_extract(f.value, '$.required') = 1
    AND coalesce(json_type(f.value, '$.default'), 'null') = 'null'
    AND NOT EXISTS (SELECT 1 FROM json_each(new.`runner_config_json`) AS c WHERE c.key = json_extract(f.value, '$.name') AND c.type != 'null')
    AND (new.`runner_id` IS NOT old.`runner_id` OR EXISTS (SELECT 1 FROM json_each(old.`runner_config_json`) AS c WHERE c.key = json_extract(f.value, '$.name') AND c.type != 'null'))
)
BEGIN
	SELECT RAISE(ABORT, 'integrity: agent_config_incomplete');
END;
--> statement-breakpoint
CREATE TRIGGER `runner_config_required_on_update` BEFORE UPDATE OF `manifest_json` ON `runner`
WHEN EXISTS (
  SELECT 1 FROM `agent` AS a, json_each(new.`manifest_json`, '$.config_schema') AS f
  WHERE a.`runner_id` = new.`runner_id`
    AND json_extract(f.value, '$.required') = 1
    AND coalesce(json_type(f.value, '$.default'), 'null') = 'null'
    AND NOT EXISTS (SELECT 1 FROM json_each(a.`runner_config_json`) AS c WHERE c.key = json_extract(f.value, '$.name') AND c.type != 'null')
    AND NOT EXISTS (
      SELECT 1 FROM json_each(old.`manifest_json`, '$.config_schema') AS o
      WHERE json_extract(o.value, '$.name') = json_extract(f.value, '$.name')
        AND json_extract(o.value, '$.required') = 1
        AND coalesce(json_type(o.value, '$.default'), 'null') = 'null'
    )
)
BEGIN
	SELECT RAISE(ABORT, 'integrity: runner_config_required');
END;
