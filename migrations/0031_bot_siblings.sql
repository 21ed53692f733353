-- One platform app installed in several workspaces, registered as one bot per installation (Slack calls one Request
-- URL per app): a request one bot refuses as another installation's is handed to the bot registered for that one. It
-- is found by a keyed digest of the app's shared secret (Slack's signing secret) and by its installation, both indexed,
-- without opening every bot's credentials. Null for every bot until the new Worker sets them (on create and PUT, else
-- when a lookup first meets the row, which also keys an installation kept before); the previous Worker never names the
-- columns: safe to apply before the deploy.
ALTER TABLE `bot` ADD `installation_key` text;--> statement-breakpoint
ALTER TABLE `bot` ADD `app_secret_digest` text;--> statement-breakpoint
CREATE INDEX `bot_app_secret` ON `bot` (`app_secret_digest`,`installation_key`);--> statement-breakpoint
-- New credentials (a PUT by either Worker, a reseal, a move to another API origin) void what was learned of the old
-- ones: the digest, which the new Worker writes again after the credentials in the same batch, and the installation
-- (already void, as it names the credentials it was learned with, but its key must not find the bot).
CREATE TRIGGER `bot_credentials_replaced` AFTER UPDATE OF `credentials_json` ON `bot`
WHEN new.`credentials_json` IS NOT old.`credentials_json`
BEGIN
	UPDATE `bot` SET `app_secret_digest` = NULL, `installation_json` = NULL, `installation_key` = NULL WHERE `bot_id` = new.`bot_id`;
END;
