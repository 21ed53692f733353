import { createHmac, generateKeyPairSync, sign as edSign, type KeyObject } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { addTelegramBot, startChatRunner, startFakePlatform, telegramBotApi, waitFor, type FakeReply, type PlatformCall } from "../support/fake-platform";

/**
 * A paused bot (`enabled: false`): each platform's webhook still verified (a forgery refused) and acknowledged as the
 * platform needs, each event recorded `bot_disabled` in its chat's EventLog, and no run, no reply, no platform call.
 * A run already going when the bot is paused still answers.
 */
const TG_TOKEN = "123456:PAUSE-telegram-bot-token-abcd";
const TG_SECRET = "pause-secret-token-0123456789";
const SLACK_SIGNING = "pause-slack-signing-secret-0123";
const LARK_TOKEN = "pause-lark-verification-token";
const DISCORD_APP = "2233445566778899";

let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startChatRunner>>;
let discordKey: KeyObject;
let discordPublicKey: string;
const telegram = telegramBotApi(TG_TOKEN);

/** Telegram's Bot API for TG_TOKEN; any other platform's call is answered as a success (a paused bot should make none). */
function api(call: PlatformCall): FakeReply {
  if (call.path.startsWith("/bot") || call.path.startsWith("/file/")) return telegram(call);
  return { json: { ok: true, code: 0 } };
}

beforeAll(async () => {
  fake = await startFakePlatform(api);
  runner = await startChatRunner("paused-chat");
  host = await startTestHost({ captureLogs: true });
  const pair = generateKeyPairSync("ed25519");
  discordKey = pair.privateKey;
  discordPublicKey = pair.publicKey.export({ type: "spki", format: "der" }).subarray(-32).toString("hex");
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

/** Registers a bot on the fake, binds the chat runner to it, and pauses it with a PUT of its view. */
async function pausedBot(botId: string, platform: string, credentials: Record<string, string>) {
  const created = await host.admin("POST", "/v1/admin/bots", { bot_id: botId, platform, api_base_url: fake.url, credentials });
  expect(created.status).toBe(201);
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: `agent-${botId}`, scope: { type: "bot", id: botId } });
  await pause(botId, false);
  return created.body.webhook_url as string;
}
async function pause(botId: string, enabled: boolean) {
  const view = (await host.admin("GET", `/v1/admin/bots/${botId}`)).body;
  const put = await host.admin("PUT", `/v1/admin/bots/${botId}`, { ...view, enabled });
  expect([put.status, put.body.enabled]).toEqual([200, enabled]);
}

async function postJson(url: string, body: string, headers: Record<string, string> = {}) {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

let updateId = 81_000;
function tgMessage(chat: string, extra: Record<string, unknown>) {
  const id = ++updateId;
  return { update_id: id, message: { message_id: id, date: Math.floor(Date.now() / 1000), chat: { id: Number(chat), type: "supergroup", title: "g" }, from: { id: 42, is_bot: false, first_name: "Ada" }, ...extra } };
}
const postTelegram = (url: string, update: unknown, secret = TG_SECRET) => postJson(url, JSON.stringify(update), { "x-telegram-bot-api-secret-token": secret });

function slackSigned(body: string, secret = SLACK_SIGNING) {
  const ts = Math.floor(Date.now() / 1000);
  return { "x-slack-request-timestamp": String(ts), "x-slack-signature": `v0=${createHmac("sha256", secret).update(`v0:${ts}:${body}`).digest("hex")}` };
}
function discordSigned(body: string, key = discordKey) {
  const timestamp = String(Math.floor(Date.now() / 1000));
  return { "x-signature-timestamp": timestamp, "x-signature-ed25519": edSign(null, Buffer.from(timestamp + body), key).toString("hex") };
}

/** What the chat's EventLog holds for an event, as an operator reads it. */
async function recorded(eventId: string) {
  const res = await host.admin("GET", `/v1/events/${encodeURIComponent(eventId)}`);
  expect(res.status).toBe(200);
  return res.body;
}
const runsOf = async (botId: string) => (await host.admin("GET", `/v1/runs?bot_id=${botId}`)).body.items as unknown[];
const transcriptOf = async (botId: string, conversationId: string) => (await host.admin("GET", `/v1/conversations/transcript?conversation_id=${conversationId}&bot_id=${botId}`)).body.items as unknown[];
const callsOtherThanTelegram = () => fake.calls.filter((c) => !c.path.startsWith("/bot") && !c.path.startsWith("/file/"));
const telegramCallsIn = (chat: string) => fake.calls.filter((c) => String(c.body?.chat_id) === chat);

describe("a paused Telegram bot", () => {
  it("records a message as bot_disabled, with its words, and starts no run, sends nothing and fetches no file", async () => {
    const url = await pausedBot("pause-tg", "telegram", { bot_token: TG_TOKEN, secret_token: TG_SECRET });
    expect((await host.admin("GET", "/v1/admin/bots/pause-tg")).body.enabled).toBe(false);
    const said = tgMessage("-810001", { text: "anyone there?" });
    expect(await postTelegram(url, said)).toEqual({ status: 200, body: { ok: true } });
    const photo = tgMessage("-810001", { caption: "look", photo: [{ file_id: "ph-paused", file_unique_id: "u1", width: 10, height: 10 }] });
    expect((await postTelegram(url, photo)).status).toBe(200);

    const event = await recorded(`telegram:pause-tg:${said.update_id}`);
    expect(event).toMatchObject({ event_type: "message.received", disposition: "bot_disabled", conversation_id: "-810001", input: { text: "anyone there?" }, input_summary: "anyone there?", actor_name: "Ada" });
    expect(event.run_id).toBeUndefined();
    const withPhoto = await recorded(`telegram:pause-tg:${photo.update_id}`);
    expect(withPhoto).toMatchObject({ disposition: "bot_disabled", input: { text: "look" }, metadata: { attachments_unavailable: expect.stringContaining("not fetched: the bot is disabled") } });
    // Listed with the chat's events, so an operator sees what arrived while the bot was paused.
    const log = await host.admin("GET", "/v1/conversations/events?conversation_id=-810001&bot_id=pause-tg");
    expect(log.body.items.map((e: { event_id: string }) => e.event_id)).toEqual(expect.arrayContaining([event.event_id, withPhoto.event_id]));

    await new Promise((r) => setTimeout(r, 500));
    expect(await runsOf("pause-tg")).toEqual([]);
    expect(runner.contexts.filter((c) => c.conversation.bot_id === "pause-tg")).toEqual([]);
    expect(telegramCallsIn("-810001")).toEqual([]);
    expect(fake.callsTo(/\/getFile$/)).toEqual([]);
    // Nor is its own name asked for (getMe), which an addressed message otherwise needs to be read.
    const addressed = tgMessage("-810001", { text: "@PausedBot are you up? /help@PausedBot", entities: [{ type: "mention", offset: 0, length: 10 }, { type: "bot_command", offset: 25, length: 16 }] });
    expect((await postTelegram(url, addressed)).status).toBe(200);
    expect((await recorded(`telegram:pause-tg:${addressed.update_id}`)).disposition).toBe("bot_disabled");
    expect(fake.callsTo(/\/getMe$/)).toEqual([]);
    // No agent ever saw them: a run after the pause does not read them as questions left unanswered.
    expect(await transcriptOf("pause-tg", "-810001")).toEqual([]);
    // Its view says why it does not answer; no agent is blamed.
    expect((await host.admin("GET", "/v1/admin/bots/pause-tg")).body.last_unbound_event).toBeUndefined();
  });

  it("still refuses a forged update, and once enabled again answers new messages but never one that came meanwhile", async () => {
    const url = await pausedBot("pause-tg2", "telegram", { bot_token: TG_TOKEN, secret_token: TG_SECRET });
    expect((await postTelegram(url, tgMessage("-810002", { text: "forged" }), "not-the-secret-token-at-all")).status).toBe(401);
    expect((await host.admin("GET", "/v1/admin/bots/pause-tg2")).body.last_webhook_refusal).toMatchObject({ reason: expect.stringContaining("X-Telegram-Bot-Api-Secret-Token") });
    const meanwhile = tgMessage("-810002", { text: "while paused" });
    expect((await postTelegram(url, meanwhile)).status).toBe(200);

    await pause("pause-tg2", true);
    // Telegram sending it again (its first answer lost) is a repeat of an event already recorded: nothing runs.
    expect((await postTelegram(url, meanwhile)).status).toBe(200);
    expect((await postTelegram(url, tgMessage("-810002", { text: "back?" }))).status).toBe(200);
    const reply = await waitFor(() => telegramCallsIn("-810002").find((c) => c.path.endsWith("/sendMessage")), 10_000, "the reply");
    expect(reply.body.text).toBe("echo: back?");
    const runs = await runsOf("pause-tg2");
    expect(runs).toHaveLength(1);
    expect(runner.contexts.filter((c) => c.input.text === "while paused")).toEqual([]);
    expect((await recorded(`telegram:pause-tg2:${meanwhile.update_id}`)).disposition).toBe("bot_disabled");
  });

  it("delivers the answer of a run already going when the bot is paused", async () => {
    const { botId, webhookUrl } = await addTelegramBot(host, { apiBaseUrl: fake.url, botToken: TG_TOKEN, secretToken: TG_SECRET }, { runner, agentId: "agent-pause-mid" });
    expect((await host.admin("GET", `/v1/admin/bots/${botId}`)).body.enabled).toBe(true);
    expect((await postTelegram(webhookUrl, tgMessage("-810003", { text: "stream one two three four" }))).status).toBe(200);
    const ctx = await waitFor(() => runner.contexts.find((c) => c.input.text === "stream one two three four"), 10_000, "the run");
    await pause(botId, false);
    expect((await host.waitForRun(ctx.run_id)).status).toBe("completed");
    await waitFor(() => telegramCallsIn("-810003").some((c) => c.body.text === "one two three four"), 10_000, "the final text in the chat");
  });
});

describe("a paused bot on the platforms that want their webhook answered", () => {
  it("Slack: url_verification still answered, a forgery refused, a message recorded and not run", async () => {
    const url = await pausedBot("pause-slack", "slack", { bot_token: "xoxb-pause-slack-token", signing_secret: SLACK_SIGNING });
    const challenge = JSON.stringify({ token: "legacy", type: "url_verification", challenge: "paused-challenge" });
    expect(await postJson(url, challenge, slackSigned(challenge))).toEqual({ status: 200, body: { challenge: "paused-challenge" } });
    const message = JSON.stringify({ type: "event_callback", team_id: "T1", event_id: "EvPAUSED1", event: { type: "message", channel: "C810", channel_type: "channel", user: "U42", text: "hello?", ts: "1700000000.000100", team: "T1" } });
    expect((await postJson(url, message, slackSigned(message, "a-forged-signing-secret-0000"))).status).toBe(401);
    expect(await postJson(url, message, slackSigned(message))).toEqual({ status: 200, body: null });
    expect(await recorded("slack:pause-slack:msg:C810:1700000000.000100")).toMatchObject({ event_type: "message.received", disposition: "bot_disabled", input: { text: "hello?" } });
    await new Promise((r) => setTimeout(r, 500));
    expect(await runsOf("pause-slack")).toEqual([]);
    expect(callsOtherThanTelegram().filter((c) => c.path.startsWith("/chat."))).toEqual([]);
  });

  it("Lark: the challenge still answered, a wrong token refused, a message recorded and not run", async () => {
    const url = await pausedBot("pause-lark", "lark", { app_id: "cli_pause", app_secret: "pause-lark-app-secret", verification_token: LARK_TOKEN });
    expect(await postJson(url, JSON.stringify({ challenge: "ch-paused", token: LARK_TOKEN, type: "url_verification" }))).toEqual({ status: 200, body: { challenge: "ch-paused" } });
    const event = (token: string) =>
      JSON.stringify({
        schema: "2.0",
        header: { event_id: "ev_paused_1", event_type: "im.message.receive_v1", create_time: String(Date.now()), token, app_id: "cli_pause", tenant_key: "tenant_1" },
        event: { sender: { sender_id: { open_id: "ou_1" }, sender_type: "user", tenant_key: "tenant_1" }, message: { message_id: "om_paused", chat_id: "oc_810", chat_type: "group", message_type: "text", content: JSON.stringify({ text: "ni hao?" }), create_time: String(Date.now()) } },
      });
    expect((await postJson(url, event("a-wrong-verification-token"))).status).toBe(401);
    expect(await postJson(url, event(LARK_TOKEN))).toEqual({ status: 200, body: {} });
    expect(await recorded("lark:pause-lark:ev_paused_1")).toMatchObject({ event_type: "message.received", disposition: "bot_disabled", input: { text: "ni hao?" } });
    // A message mentioning someone: the bot's own open_id (a token and bot/v3/info) is not asked for either.
    const mentioning = JSON.stringify({
      schema: "2.0",
      header: { event_id: "ev_paused_2", event_type: "im.message.receive_v1", create_time: String(Date.now()), token: LARK_TOKEN, app_id: "cli_pause", tenant_key: "tenant_1" },
      event: {
        sender: { sender_id: { open_id: "ou_1" }, sender_type: "user", tenant_key: "tenant_1" },
        message: { message_id: "om_paused_2", chat_id: "oc_810", chat_type: "group", message_type: "text", content: JSON.stringify({ text: "@_user_1 hello" }), mentions: [{ key: "@_user_1", id: { open_id: "ou_pause_bot" }, name: "Paused Bot" }], create_time: String(Date.now()) },
      },
    });
    expect(await postJson(url, mentioning)).toEqual({ status: 200, body: {} });
    expect(await recorded("lark:pause-lark:ev_paused_2")).toMatchObject({ disposition: "bot_disabled" });
    await new Promise((r) => setTimeout(r, 500));
    expect(await runsOf("pause-lark")).toEqual([]);
    expect(callsOtherThanTelegram().filter((c) => c.path.startsWith("/open-apis/"))).toEqual([]);
  });

  it("Discord: PING still PONG, a forgery refused, a command told privately the app is paused and not run", async () => {
    const url = await pausedBot("pause-discord", "discord", { application_id: DISCORD_APP, public_key: discordPublicKey, bot_token: "pause-discord-bot-token" });
    const ping = JSON.stringify({ id: "1", application_id: DISCORD_APP, type: 1, token: "t", version: 1 });
    expect(await postJson(url, ping, discordSigned(ping))).toEqual({ status: 200, body: { type: 1 } });
    const command = JSON.stringify({
      id: "981000000000000001",
      application_id: DISCORD_APP,
      type: 2,
      token: "interaction-token-paused-secret",
      version: 1,
      guild_id: "G1",
      channel_id: "C810",
      channel: { id: "C810", type: 0 },
      member: { user: { id: "U42", username: "ada", global_name: "Ada" } },
      data: { id: "cmd1", name: "ask", type: 1, options: [{ name: "question", type: 3, value: "are you up?" }] },
    });
    expect((await postJson(url, command, discordSigned(command, generateKeyPairSync("ed25519").privateKey))).status).toBe(401);
    expect(await postJson(url, command, discordSigned(command))).toEqual({ status: 200, body: { type: 4, data: { content: "This app is paused; try again later.", flags: 64 } } });
    expect(await recorded("discord:pause-discord:981000000000000001")).toMatchObject({ event_type: "message.received", disposition: "bot_disabled", input: { text: "are you up?" } });
    await new Promise((r) => setTimeout(r, 500));
    expect(await runsOf("pause-discord")).toEqual([]);
    expect(callsOtherThanTelegram().filter((c) => c.path.startsWith("/webhooks/") || c.path.startsWith("/channels/"))).toEqual([]);
  });
});
