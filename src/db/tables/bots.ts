/** Chat platform bots and the chats whose events continue another chat's conversation. */
import { index, integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";

/**
 * A chat platform bot an operator registered (Telegram, Slack, Lark, Discord).
 * Its webhook is `/v1/webhooks/{platform}/{bot_id}`; agents bind to it with scope `bot`.
 */
export const bot = sqliteTable(
  "bot",
  {
    botId: text("bot_id").primaryKey(),
    platform: text("platform").notNull(),
    name: text("name"),
    workspaceId: text("workspace_id"),
    // Overrides the platform's API origin (a fake on loopback in tests); null uses the platform's own.
    apiBaseUrl: text("api_base_url"),
    // The platform's secrets as JSON; never returned by any API nor logged.
    credentialsJson: text("credentials_json").notNull(),
    // Paused when false: its webhooks are still verified and answered, their events recorded, but nothing runs.
    enabled: integer("enabled", { mode: "boolean" }).notNull().default(true),
    createdAt: integer("created_at").notNull(),
    updatedAt: integer("updated_at").notNull(),
    // Why the bot last did not answer, for its admin view (src/stores/bot-notes.ts): JSON, null until it first happens.
    // Written where each happens, never on a webhook or reply that went well, and never by a PUT.
    lastWebhookRefusalJson: text("last_webhook_refusal_json"),
    lastUnboundEventJson: text("last_unbound_event_json"),
    lastDeliveryFailureJson: text("last_delivery_failure_json"),
    // Which installation of its platform app the bot is (Slack: its team or enterprise and its app), as the platform
    // said when first asked, with a digest of the credentials it was asked with: new credentials (a PUT, by any
    // release) void it. JSON; null until first learned (src/stores/bot-installation.ts), or when the cron asked and the
    // platform did not say, that instead (when, and whether it refused the credentials). Never written by a PUT.
    installationJson: text("installation_json"),
    // Which installation it is, as a key a lookup can use ("team:T1", "enterprise:E1"): set with installationJson by
    // this release, and null while that is (a row pinned by the release before is keyed when a lookup first reads it).
    installationKey: text("installation_key"),
    // A keyed digest (HMAC under a key derived from SECRETS_KEY, never the bare hash) of the secret all installations of
    // its platform app share (Slack: the signing secret), so a request one bot refuses as another installation's finds
    // the bot registered for that one without opening every bot's credentials (src/stores/bot-siblings.ts). Null
    // until digested: set on create and PUT, else when a lookup or the cron first meets the row; a marker for a row
    // whose credentials cannot be read or opened (src/stores/bot-digests.ts). A trigger voids it, and the
    // installation, whenever the credentials change (by any release, or a reseal).
    appSecretDigest: text("app_secret_digest"),
  },
  (t) => [index("bot_created").on(t.createdAt, t.botId), index("bot_app_secret").on(t.appSecretDigest, t.installationKey)],
);

/**
 * A chat whose events continue another chat's conversation, per bot: a Telegram group upgraded to a supergroup gets a
 * new chat id, and the supergroup's events are recorded in the group's conversation (src/stores/chat-moves.ts).
 */
export const chatAlias = sqliteTable(
  "chat_alias",
  {
    botId: text("bot_id").notNull(),
    // The chat as its events name it (the supergroup).
    chatId: text("chat_id").notNull(),
    // The conversation they are recorded in (the group's chat id).
    conversationId: text("conversation_id").notNull(),
    // When the host learned of the move: a bot id registered again later does not take it (Bot.registeredAt).
    createdAt: integer("created_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.botId, t.chatId] })],
);
