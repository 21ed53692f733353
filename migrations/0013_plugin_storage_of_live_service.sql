-- Deleting a runner service deletes its plugin storage area. A run of one of
-- its runners still in flight when it was deleted kept writing (storage.set),
-- and those rows were left for good under an id no service will have again:
-- readable by no run, deleted by nothing. A plugin row of a service that no
-- longer exists is now not written (IGNORE: the call answers as usual, as a
-- deleted agent's state does, 0012).
CREATE TRIGGER `storage_plugin_service_exists` BEFORE INSERT ON `storage`
WHEN new.`area` = 'plugin' AND NOT EXISTS (SELECT 1 FROM `runner_service` WHERE `service_id` = new.`owner_key`)
BEGIN
	SELECT RAISE(IGNORE);
END;
