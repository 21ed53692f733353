import { createHmac } from "node:crypto";
import { describe, expect, it } from "vitest";
import { slack } from "../../src/platforms/slack";
import type { SlackCredentials } from "../../src/platforms/slack/api";
import type { Bot } from "../../src/platforms/types";

/**
 * A reply in a thread whose parent is the bot's own answer takes that answer from the host's record, its sender as a
 * read from Slack would name it (`reply_to.actor`: the adapter's ownActor). A bot stored with a user token (xoxp-,
 * before bot tokens were required) posts as that user, not as the bot user the envelope's authorizations name: Slack
 * would say the user, so the record names no sender rather than the bot user.
 */
const SIGNING_SECRET = "slack-signing-secret-own-actor-0123";
const BOT_USER = "UBOTOWN";

const botWith = (token: string): Bot<SlackCredentials> => ({
  botId: "bot_own_actor",
  platform: "slack",
  name: null,
  workspaceId: "T1",
  apiBaseUrl: "https://slack.com/api",
  credentials: { bot_token: token, signing_secret: SIGNING_SECRET },
  enabled: true,
  registeredAt: 0,
});

/** A person's reply in the thread of the bot's answer `1800000000.000100`, signed as Slack signs it. */
async function threadReplyTo(bot: Bot<SlackCredentials>) {
  const event = { type: "message", user: "U42", text: "make it shorter", channel: "C1", channel_type: "channel", ts: "1800000005.000200", thread_ts: "1800000000.000100", parent_user_id: BOT_USER };
  const rawBody = JSON.stringify({ type: "event_callback", event_id: "EvOwn1", team_id: "T1", api_app_id: "A1", event_time: 1_800_000_005, authorizations: [{ team_id: "T1", user_id: BOT_USER, is_bot: true }], event });
  const now = Date.now();
  const timestamp = Math.floor(now / 1000);
  const signature = `v0=${createHmac("sha256", SIGNING_SECRET).update(`v0:${timestamp}:${rawBody}`).digest("hex")}`;
  const headers = new Headers({ "content-type": "application/json", "x-slack-request-timestamp": String(timestamp), "x-slack-signature": signature });
  // The installation its webhook keeps once Slack's auth.test named it: T1, as the envelope says.
  const installation = { pinned: async () => ({ team_id: "T1", enterprise_id: null, enterprise_install: false, app_id: "A1" }), pin: async () => {}, refusedAt: async () => null, keepRefused: async () => {} };
  const inbound = await slack.receive(bot, { headers, rawBody, now, apiTimeoutMs: 1_000, installation });
  if (inbound.kind !== "events") throw new Error(`not events: ${inbound.kind}`);
  const [reply] = inbound.events;
  expect(reply).toMatchObject({ eventType: "message.received", repliesTo: "1800000000.000100" });
  return slack.ownActor!(bot, reply);
}

describe("Slack: the sender of the bot's own answer a thread reply names", () => {
  it("is the bot user for a bot token, and none for a user token's bot (it posts as its user)", async () => {
    expect(await threadReplyTo(botWith("xoxb-TEST-own-actor-bot-token-123"))).toEqual({ actor_type: "bot", actor_id: BOT_USER, actor_name: null });
    expect(await threadReplyTo(botWith("xoxp-TEST-own-actor-user-token-123"))).toBeNull();
  });
});
