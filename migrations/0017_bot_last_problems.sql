-- Why a bot last did not answer, shown on its admin view: a webhook refused (a wrong secret, credentials the keys
-- cannot open), an event no agent took, a reply the platform refused. JSON each; null until it first happens.
ALTER TABLE `bot` ADD `last_webhook_refusal_json` text;--> statement-breakpoint
ALTER TABLE `bot` ADD `last_unbound_event_json` text;--> statement-breakpoint
ALTER TABLE `bot` ADD `last_delivery_failure_json` text;