-- Which stored platform payloads (R2 `raw/…`) are still named by an event:
-- asked by retention for each payload it sweeps (src/retention). Only
-- platform events have a raw_ref, so the index holds only theirs.
CREATE INDEX `event_log_raw_ref` ON `event_log` (`raw_ref`) WHERE `raw_ref` IS NOT NULL;
