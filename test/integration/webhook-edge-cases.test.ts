/**
 * a verified platform request the host cannot fully read is recorded
 * and acknowledged (README "Chat platforms": "anything else is recorded as
 * platform.unhandled and acknowledged"; src/platforms/telegram/index.ts:
 * "Verified but not an update we can read: recorded and acknowledged, so
 * Telegram does not retry it"), never a 500 that makes the platform redeliver it
 * again and again. Here the request is authentic; only a timestamp field is out
 * of the range a JavaScript Date can hold.
 */
import { createHmac } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { startFakePlatform } from "../support/fake-platform";
import { SLACK_AUTH_TEST } from "../support/slack-events";

const SIGNING_SECRET = "edge-slack-signing-secret-0123";
const TG_SECRET = "edge_tg_secret_0123456789";
const LARK_TOKEN = "edge-lark-verification-token";

let host: TestHost;
/** Slack's Web API, as far as the host asks it here: who the bot token is (workspace T1, as the events say). */
let slackApi: Awaited<ReturnType<typeof startFakePlatform>>;
const bots: Record<string, { id: string; url: string }> = {};

beforeAll(async () => {
  host = await startTestHost({ captureLogs: true });
  slackApi = await startFakePlatform((call) => (call.path === "/auth.test" ? { json: SLACK_AUTH_TEST } : { status: 404, json: { ok: false, error: "unknown_method" } }));
  const make = async (platform: string, credentials: Record<string, string>, apiBaseUrl?: string) => {
    const res = await host.admin("POST", "/v1/admin/bots", { platform, credentials, api_base_url: apiBaseUrl });
    expect(res.status).toBe(201);
    bots[platform] = { id: res.body.bot_id, url: res.body.webhook_url };
  };
  await make("slack", { bot_token: "xoxb-review-b", signing_secret: SIGNING_SECRET }, slackApi.url);
  await make("telegram", { bot_token: "123456:edge", secret_token: TG_SECRET });
  await make("lark", { app_id: "cli_edge", app_secret: "edge-app-secret", verification_token: LARK_TOKEN });
});
afterAll(async () => {
  await host?.dispose();
  await slackApi?.close();
});

const recorded = (eventId: string) => host.query("SELECT event_id FROM event_log WHERE event_id = ?", [eventId]);

describe("verified webhooks with an out-of-range timestamp field", () => {
  it("Slack: a signed event_callback whose event_time is out of range is acknowledged and recorded, not a 500", async () => {
    const body = JSON.stringify({ token: "t", team_id: "T1", type: "event_callback", event_id: "EvRB1", event_time: 1e20, event: { type: "reaction_added", user: "U1" } });
    const ts = Math.floor(Date.now() / 1000);
    const signature = `v0=${createHmac("sha256", SIGNING_SECRET).update(`v0:${ts}:${body}`).digest("hex")}`;
    const res = await fetch(bots.slack.url, { method: "POST", headers: { "content-type": "application/json", "x-slack-request-timestamp": String(ts), "x-slack-signature": signature }, body });
    expect(res.status).toBe(200);
    expect(await recorded(`slack:${bots.slack.id}:EvRB1`)).toHaveLength(1);
  });

  it("Telegram: an update with the right secret token whose message date is out of range is acknowledged and recorded, not a 500", async () => {
    const body = JSON.stringify({ update_id: 424242, message: { message_id: 1, date: 1e15, chat: { id: 77, type: "private" }, from: { id: 5, is_bot: false, first_name: "Ada" }, text: "hi" } });
    const res = await fetch(bots.telegram.url, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": TG_SECRET }, body });
    expect(res.status).toBe(200);
    expect(await recorded(`telegram:${bots.telegram.id}:424242`)).toHaveLength(1);
  });

  it("Lark: an event with the right verification token whose create_time is out of range is acknowledged and recorded, not a 500", async () => {
    const body = JSON.stringify({
      schema: "2.0",
      header: { event_id: "lark-rb-1", event_type: "im.chat.updated_v1", create_time: "99999999999999999", token: LARK_TOKEN, app_id: "cli_edge", tenant_key: "tk" },
      event: { chat_id: "oc_1" },
    });
    const res = await fetch(bots.lark.url, { method: "POST", headers: { "content-type": "application/json" }, body });
    expect(res.status).toBe(200);
    expect(await recorded(`lark:${bots.lark.id}:lark-rb-1`)).toHaveLength(1);
  });
});

describe("a refused duplicate leaves the recorded event's facts alone", () => {
  const slackPost = async (payload: unknown) => {
    const body = JSON.stringify(payload);
    const ts = Math.floor(Date.now() / 1000);
    const signature = `v0=${createHmac("sha256", SIGNING_SECRET).update(`v0:${ts}:${body}`).digest("hex")}`;
    return fetch(bots.slack.url, { method: "POST", headers: { "content-type": "application/json", "x-slack-request-timestamp": String(ts), "x-slack-signature": signature }, body });
  };

  it("Slack: the app_mention copy of a recorded message (refused as a duplicate) does not replace the raw payload its raw_ref names", async () => {
    const msg = { type: "message", channel: "CRB1", channel_type: "channel", user: "U42", text: "<@UBOT> hello", ts: "1800000100.000100", team: "T1" };
    const first = await slackPost({ token: "t", team_id: "T1", type: "event_callback", event_id: "EvRBmsg", event_time: 1800000100, event: msg });
    expect(first.status).toBe(200);
    const eventId = `slack:${bots.slack.id}:msg:CRB1:1800000100.000100`;
    const [row] = await host.query<{ raw_ref: string; source_event_type: string }>("SELECT raw_ref, source_event_type FROM event_log WHERE event_id = ?", [eventId]);
    expect(row.source_event_type).toBe("message");
    const before = JSON.parse(new TextDecoder().decode((await host.r2Object(row.raw_ref))!));
    expect(before).toMatchObject({ event_id: "EvRBmsg", event: { type: "message" } });

    // Slack's second delivery of the same message: refused as a duplicate (one event per message).
    const copy = await slackPost({ token: "t", team_id: "T1", type: "event_callback", event_id: "EvRBmention", event_time: 1800000100, event: { ...msg, type: "app_mention" } });
    expect(copy.status).toBe(200);
    expect(await host.query("SELECT 1 FROM event_log WHERE event_id = ?", [eventId])).toHaveLength(1);

    const after = JSON.parse(new TextDecoder().decode((await host.r2Object(row.raw_ref))!));
    // The recorded event is the `message` delivery; its raw payload must still be that one.
    expect(after).toMatchObject({ event_id: "EvRBmsg", event: { type: "message" } });
  });
});
