-- PROTOCOL §11 names a run that has not started `created` (it was stored as `queued`).
UPDATE `run` SET `status` = 'created' WHERE `status` = 'queued';
