-- What runners keep across runs is bounded per state scope (STATE_MAX_SCOPE_KEYS, STATE_MAX_SCOPE_BYTES) and per
-- storage area (STORAGE_MAX_AREA_KEYS, STORAGE_MAX_AREA_BYTES). Each scope's and area's keys and value bytes are kept
-- in a row of their own, so a write checks its cap against that row in the statement that writes (a count over up to
-- 10,000 keys would be read on every write). Triggers keep the rows exact whichever path writes or deletes (a run's
-- state.set, state.updated or seed, a runner's delete, retention's sweep of a deleted agent's state or service's
-- area, an operator's own statement); an emptied scope's row goes. State bytes are the UTF-8 bytes of the values'
-- JSON; storage bytes three per four base64 characters (the decoded size, its padding counted). Both are read with
-- octet_length, from each row's header: no value is read, so the count of the rows already there, at the end, in this
-- migration's transaction, costs one read of the two tables' leaf pages (as an index build does), whatever the values weigh.
CREATE TABLE `runner_state_usage` (
	`scope_key` text PRIMARY KEY NOT NULL,
	`keys` integer NOT NULL,
	`bytes` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `storage_usage` (
	`area` text NOT NULL,
	`owner_key` text NOT NULL,
	`keys` integer NOT NULL,
	`bytes` integer NOT NULL,
	PRIMARY KEY(`area`, `owner_key`)
);
--> statement-breakpoint
CREATE TRIGGER `runner_state_usage_insert` AFTER INSERT ON `runner_state`
BEGIN
	INSERT INTO `runner_state_usage` (`scope_key`, `keys`, `bytes`) VALUES (new.`scope_key`, 1, octet_length(new.`value_json`))
	ON CONFLICT (`scope_key`) DO UPDATE SET `keys` = `keys` + 1, `bytes` = `bytes` + excluded.`bytes`;
END;
--> statement-breakpoint
CREATE TRIGGER `runner_state_usage_overwrite` AFTER UPDATE OF `value_json` ON `runner_state`
WHEN old.`scope_key` = new.`scope_key`
BEGIN
	UPDATE `runner_state_usage` SET `bytes` = `bytes` - octet_length(old.`value_json`) + octet_length(new.`value_json`) WHERE `scope_key` = new.`scope_key`;
END;
--> statement-breakpoint
CREATE TRIGGER `runner_state_usage_move` AFTER UPDATE OF `scope_key` ON `runner_state`
WHEN old.`scope_key` <> new.`scope_key`
BEGIN
	UPDATE `runner_state_usage` SET `keys` = `keys` - 1, `bytes` = `bytes` - octet_length(old.`value_json`) WHERE `scope_key` = old.`scope_key`;
	DELETE FROM `runner_state_usage` WHERE `scope_key` = old.`scope_key` AND `keys` <= 0;
	INSERT INTO `runner_state_usage` (`scope_key`, `keys`, `bytes`) VALUES (new.`scope_key`, 1, octet_length(new.`value_json`))
	ON CONFLICT (`scope_key`) DO UPDATE SET `keys` = `keys` + 1, `bytes` = `bytes` + excluded.`bytes`;
END;
--> statement-breakpoint
CREATE TRIGGER `runner_state_usage_delete` AFTER DELETE ON `runner_state`
BEGIN
	UPDATE `runner_state_usage` SET `keys` = `keys` - 1, `bytes` = `bytes` - octet_length(old.`value_json`) WHERE `scope_key` = old.`scope_key`;
	DELETE FROM `runner_state_usage` WHERE `scope_key` = old.`scope_key` AND `keys` <= 0;
END;
--> statement-breakpoint
CREATE TRIGGER `storage_usage_insert` AFTER INSERT ON `storage`
BEGIN
	INSERT INTO `storage_usage` (`area`, `owner_key`, `keys`, `bytes`)
	VALUES (new.`area`, new.`owner_key`, 1, octet_length(new.`value_base64`) / 4 * 3)
	ON CONFLICT (`area`, `owner_key`) DO UPDATE SET `keys` = `keys` + 1, `bytes` = `bytes` + excluded.`bytes`;
END;
--> statement-breakpoint
CREATE TRIGGER `storage_usage_overwrite` AFTER UPDATE OF `value_base64` ON `storage`
WHEN old.`area` = new.`area` AND old.`owner_key` = new.`owner_key`
BEGIN
	UPDATE `storage_usage`
	SET `bytes` = `bytes`
		- octet_length(old.`value_base64`) / 4 * 3
		+ octet_length(new.`value_base64`) / 4 * 3
	WHERE `area` = new.`area` AND `owner_key` = new.`owner_key`;
END;
--> statement-breakpoint
CREATE TRIGGER `storage_usage_move` AFTER UPDATE OF `area`, `owner_key` ON `storage`
WHEN old.`area` <> new.`area` OR old.`owner_key` <> new.`owner_key`
BEGIN
	UPDATE `storage_usage`
	SET `keys` = `keys` - 1, `bytes` = `bytes` - octet_length(old.`value_base64`) / 4 * 3
	WHERE `area` = old.`area` AND `owner_key` = old.`owner_key`;
	DELETE FROM `storage_usage` WHERE `area` = old.`area` AND `owner_key` = old.`owner_key` AND `keys` <= 0;
	INSERT INTO `storage_usage` (`area`, `owner_key`, `keys`, `bytes`)
	VALUES (new.`area`, new.`owner_key`, 1, octet_length(new.`value_base64`) / 4 * 3)
	ON CONFLICT (`area`, `owner_key`) DO UPDATE SET `keys` = `keys` + 1, `bytes` = `bytes` + excluded.`bytes`;
END;
--> statement-breakpoint
CREATE TRIGGER `storage_usage_delete` AFTER DELETE ON `storage`
BEGIN
	UPDATE `storage_usage`
	SET `keys` = `keys` - 1, `bytes` = `bytes` - octet_length(old.`value_base64`) / 4 * 3
	WHERE `area` = old.`area` AND `owner_key` = old.`owner_key`;
	DELETE FROM `storage_usage` WHERE `area` = old.`area` AND `owner_key` = old.`owner_key` AND `keys` <= 0;
END;
--> statement-breakpoint
INSERT INTO `runner_state_usage` (`scope_key`, `keys`, `bytes`)
SELECT `scope_key`, count(*), sum(octet_length(`value_json`)) FROM `runner_state` GROUP BY `scope_key`;
--> statement-breakpoint
INSERT INTO `storage_usage` (`area`, `owner_key`, `keys`, `bytes`)
SELECT `area`, `owner_key`, count(*), sum(octet_length(`value_base64`) / 4 * 3)
FROM `storage` GROUP BY `area`, `owner_key`;
