-- Which installation of its platform app each bot is (Slack: its team, or its enterprise for an org-wide install, and
-- its app), learned by the new Worker from the platform when the bot's webhook is first called: a request signed for
-- another installation is refused. Null for every bot until then; the previous Worker never names the column, and a
-- PUT of new credentials by either Worker voids what was learned (it names the credentials it was learned with): safe
-- to apply before the deploy.
ALTER TABLE `bot` ADD `installation_json` text;
