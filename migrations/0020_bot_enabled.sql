-- A switch that pauses a bot: its webhooks are still verified and acknowledged, their events recorded `bot_disabled`,
-- nothing runs. Every bot stored before is enabled, and a Worker older than this migration, which never names the
-- column, keeps inserting enabled bots: safe to apply before the deploy.
ALTER TABLE `bot` ADD `enabled` integer DEFAULT true NOT NULL;