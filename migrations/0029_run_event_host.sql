-- A run's host-made ledger entries (warnings, Host API records, host ends: few), so a run's end counts its runner's
-- results (result_count) as all its entries, from the primary key's index, less these: no row of a ledger of up to
-- RUN_MAX_RESULTS entries is read inside the end's write. Built with one read of run_event; the previous Worker's writes
-- keep it up to date (it never reads it): safe to apply before the deploy.
CREATE INDEX `run_event_host` ON `run_event` (`run_id`) WHERE origin = 'host';