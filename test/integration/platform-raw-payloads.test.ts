import { createCipheriv, createHash, createHmac, randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_TOKEN, messageEvent, startTestHost, type TestHost } from "../support/host";
import { startChatRunner, startFakePlatform, waitFor, type FakeReply, type PlatformCall } from "../support/fake-platform";
import { discordKeyPair, postInteraction } from "../support/discord-signing";
import { SLACK_AUTH_TEST } from "../support/slack-events";

/**
 * What an operator wiring a bot reads: the payload a platform sent for an event (GET /v1/admin/events/{id}/raw, its
 * secret fields never shown), and from the event what the host did with it, in order.
 */
const SLACK_BOT_TOKEN = "xoxb-RAW-slack-bot-token-1234567890";
const SLACK_SIGNING_SECRET = "raw-slack-signing-secret-0123456789";
const SLACK_LEGACY_TOKEN = "raw-slack-legacy-verification-token";
/** A workflow step's token (Slack's function_executed event): it calls the API for the app while the step runs. */
const SLACK_WORKFLOW_TOKEN = "xwfp-raw-slack-workflow-token-0123456789";
/** A user context's `secret` (a function's inputs, an interactivity's interactor): what vouches for the user it names. */
const SLACK_USER_CONTEXT_SECRET = "raw-slack-user-context-secret-AbCdEf0123456789";
const SLACK_RESPONSE_URL = "https://hooks.slack.com/actions/T1/raw-secret-response-url/0123456789";
const LARK_APP_SECRET = "raw-lark-app-secret-0123456789abcdef";
const LARK_VERIFICATION_TOKEN = "raw-lark-verification-token-abcdef";
const LARK_ENCRYPT_KEY = "raw-lark-encrypt-key-0123456789";
const LARK_CARD_TOKEN = "c-raw-card-update-token-0123456789";
const DISCORD_BOT_TOKEN = "raw-discord-bot-token-SECRET-0123456789";
const DISCORD_INTERACTION_TOKEN = "raw-discord-interaction-token-SECRET-abcdef";
const TELEGRAM_BOT_TOKEN = "4242:raw-telegram-bot-token";
const TELEGRAM_SECRET_TOKEN = "raw-telegram-secret-token-0123";
const SECRETS = [SLACK_BOT_TOKEN, SLACK_SIGNING_SECRET, SLACK_LEGACY_TOKEN, SLACK_WORKFLOW_TOKEN, SLACK_USER_CONTEXT_SECRET, SLACK_RESPONSE_URL, LARK_APP_SECRET, LARK_VERIFICATION_TOKEN, LARK_ENCRYPT_KEY, LARK_CARD_TOKEN, DISCORD_BOT_TOKEN, DISCORD_INTERACTION_TOKEN, TELEGRAM_BOT_TOKEN, TELEGRAM_SECRET_TOKEN];
const DAY_MS = 24 * 3600 * 1000;

let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startChatRunner>>;
const bots: Record<"slack" | "lark" | "discord" | "telegram", { botId: string; url: string }> = {} as never;
const discordKey = discordKeyPair();
let ts = 1_700_000_000;

function slackApi(call: PlatformCall): FakeReply {
  // Who the bot token is (its workspace T1, as the envelopes say): the host checks every request against it.
  if (call.path === "/auth.test") return { json: SLACK_AUTH_TEST };
  if (call.headers.authorization !== `Bearer ${SLACK_BOT_TOKEN}`) return { json: { ok: false, error: "invalid_auth" } };
  if (call.path === "/chat.postMessage") return { json: { ok: true, channel: call.body.channel, ts: `${++ts}.000100` } };
  if (call.path === "/chat.update") return { json: { ok: true, channel: call.body.channel, ts: call.body.ts } };
  return { status: 404, json: { ok: false, error: "unknown_method" } };
}

async function addBot(platform: keyof typeof bots, credentials: Record<string, string>, apiBaseUrl = "http://127.0.0.1:9") {
  const created = await host.admin("POST", "/v1/admin/bots", { platform, api_base_url: apiBaseUrl, credentials });
  expect(created.status).toBe(201);
  bots[platform] = { botId: created.body.bot_id, url: created.body.webhook_url };
}

beforeAll(async () => {
  fake = await startFakePlatform(slackApi);
  runner = await startChatRunner("raw-payload-chat");
  host = await startTestHost({ vars: { RETENTION_DAYS: "1" } });
  await addBot("slack", { bot_token: SLACK_BOT_TOKEN, signing_secret: SLACK_SIGNING_SECRET }, fake.url);
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "raw-slack-agent", scope: { type: "bot", id: bots.slack.botId } });
  // The others answer nothing: what they sent is recorded all the same.
  await addBot("lark", { app_id: "cli_raw_app", app_secret: LARK_APP_SECRET, verification_token: LARK_VERIFICATION_TOKEN, encrypt_key: LARK_ENCRYPT_KEY });
  await addBot("discord", { application_id: "99887766554433", public_key: discordKey.publicKeyHex, bot_token: DISCORD_BOT_TOKEN });
  await addBot("telegram", { bot_token: TELEGRAM_BOT_TOKEN, secret_token: TELEGRAM_SECRET_TOKEN });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

/** GET /v1/admin/events/{id}/raw as an operator calls it: the status, content type and body text (`headers`: all of them). */
async function readRaw(eventId: string, token: string | null = ADMIN_TOKEN) {
  const res = await fetch(`${host.url}/v1/admin/events/${eventId}/raw`, { headers: token ? { authorization: `Bearer ${token}` } : {} });
  const raw = { status: res.status, contentType: res.headers.get("content-type"), text: await res.text() };
  return Object.defineProperty(raw, "headers", { value: res.headers, enumerable: false }) as typeof raw & { headers: Headers };
}
const noSecretIn = (text: string) => expect(SECRETS.filter((s) => text.includes(s))).toEqual([]);

async function postSlack(payload: unknown, form = false) {
  // An interactivity request is form-encoded, its JSON in one `payload` field, signed over the body as sent.
  const body = form ? new URLSearchParams({ payload: JSON.stringify(payload) }).toString() : JSON.stringify(payload);
  const timestamp = Math.floor(Date.now() / 1000);
  const signature = `v0=${createHmac("sha256", SLACK_SIGNING_SECRET).update(`v0:${timestamp}:${body}`).digest("hex")}`;
  const contentType = form ? "application/x-www-form-urlencoded" : "application/json";
  const res = await fetch(bots.slack.url, { method: "POST", headers: { "content-type": contentType, "x-slack-request-timestamp": String(timestamp), "x-slack-signature": signature }, body });
  expect(res.status).toBe(200);
}

async function postLarkEncrypted(payload: unknown) {
  const iv = randomBytes(16);
  const cipher = createCipheriv("aes-256-cbc", createHash("sha256").update(LARK_ENCRYPT_KEY).digest(), iv);
  const body = JSON.stringify({ encrypt: Buffer.concat([iv, cipher.update(JSON.stringify(payload), "utf8"), cipher.final()]).toString("base64") });
  const timestamp = String(Math.floor(Date.now() / 1000));
  const nonce = randomBytes(8).toString("hex");
  const signature = createHash("sha256").update(timestamp + nonce + LARK_ENCRYPT_KEY + body).digest("hex");
  const res = await fetch(bots.lark.url, { method: "POST", headers: { "content-type": "application/json", "x-lark-request-timestamp": timestamp, "x-lark-request-nonce": nonce, "x-lark-signature": signature }, body });
  expect(res.status).toBe(200);
}

let updateId = 9_000;
async function postTelegram(text: string, chatId = -700) {
  const update = { update_id: ++updateId, message: { message_id: updateId, date: Math.floor(Date.now() / 1000), chat: { id: chatId, type: "supergroup", title: "Ops" }, from: { id: 42, is_bot: false, first_name: "Ada", language_code: "en" }, text } };
  const body = JSON.stringify(update);
  const res = await fetch(bots.telegram.url, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": TELEGRAM_SECRET_TOKEN }, body });
  expect(res.status).toBe(200);
  return { eventId: `telegram:${bots.telegram.botId}:${update.update_id}`, body };
}

describe("GET /v1/admin/events/{event_id}/raw", () => {
  it("gives a Slack event's payload as Slack sent it, without the legacy verification token, and only to the admin token", async () => {
    const event = { type: "message", channel: "C_RAW", channel_type: "channel", user: "U42", text: "what did slack send?", ts: `${++ts}.000200`, team: "T1", blocks: [{ type: "rich_text", block_id: "b1" }] };
    const payload = { token: SLACK_LEGACY_TOKEN, team_id: "T1", api_app_id: "A1", type: "event_callback", event_id: "EvRAW1", event_time: 1_700_000_123, authorizations: [{ team_id: "T1", user_id: "UBOT", is_bot: true }], event };
    await postSlack(payload);
    const eventId = `slack:${bots.slack.botId}:msg:C_RAW:${event.ts}`;

    const raw = await readRaw(eventId);
    expect(raw.status).toBe(200);
    expect(raw.contentType).toMatch(/^application\/json/);
    // As Slack wrote it, key order included, but for its token.
    const { token: _token, ...sent } = payload;
    expect(raw.text).toBe(JSON.stringify(sent));
    noSecretIn(raw.text);
    // What a user wrote is in it as sent: opened in an operator's browser, it is never sniffed or rendered as a page.
    expect(raw.headers.get("x-content-type-options")).toBe("nosniff");
    expect(raw.headers.get("content-security-policy")).toBe("default-src 'none'; sandbox");
    // Operator data: the admin bearer token, as every /v1/admin route.
    expect((await readRaw(eventId, null)).status).toBe(401);
    expect((await readRaw(eventId, "not-the-admin-token")).status).toBe(401);
  });

  it("gives a Lark payload decrypted, without the verification token nor a card callback's update token", async () => {
    const payload = {
      schema: "2.0",
      header: { event_id: "ev_raw_card_1", event_type: "card.action.trigger", create_time: String(Date.now()), token: LARK_VERIFICATION_TOKEN, app_id: "cli_raw_app", tenant_key: "tenant_1" },
      event: { operator: { tenant_key: "tenant_1", open_id: "ou_user_1" }, token: LARK_CARD_TOKEN, action: { tag: "button", value: { choice: "yes" } }, host: "im_message", context: { open_message_id: "om_card_1", open_chat_id: "oc_card" } },
    };
    await postLarkEncrypted(payload);
    const eventId = `lark:${bots.lark.botId}:ev_raw_card_1`;
    expect((await host.admin("GET", `/v1/events/${eventId}`)).body).toMatchObject({ event_type: "message.received", source_event_type: "card.action.trigger" });

    const raw = await readRaw(eventId);
    expect(raw.status).toBe(200);
    const { token: _header, ...header } = payload.header;
    const { token: _card, ...rest } = payload.event;
    expect(JSON.parse(raw.text)).toEqual({ schema: "2.0", header, event: rest });
    noSecretIn(raw.text);
    // Nor is the card's token kept in R2, where retention and the orphan sweep read these payloads.
    const [{ raw_ref: rawRef }] = await host.query<{ raw_ref: string }>("SELECT raw_ref FROM event_log WHERE event_id = ?", [eventId]);
    noSecretIn(new TextDecoder().decode((await host.r2Object(rawRef))!));
  });

  it("removes the secret fields on the way out too, from a payload stored before they were known to be secret", async () => {
    const payload = { schema: "2.0", header: { event_id: "ev_raw_card_2", event_type: "card.action.trigger", create_time: String(Date.now()), token: LARK_VERIFICATION_TOKEN, app_id: "cli_raw_app", tenant_key: "tenant_1" }, event: { action: { tag: "button" } } };
    await postLarkEncrypted(payload);
    const eventId = `lark:${bots.lark.botId}:ev_raw_card_2`;
    const [{ raw_ref: rawRef }] = await host.query<{ raw_ref: string }>("SELECT raw_ref FROM event_log WHERE event_id = ?", [eventId]);
    // As an earlier release stored it: the card's token kept.
    const { token: _header, ...header } = payload.header;
    await host.r2Put(rawRef, JSON.stringify({ ...payload, header, event: { ...payload.event, token: LARK_CARD_TOKEN } }), "application/json");
    const raw = await readRaw(eventId);
    expect(raw.status).toBe(200);
    expect(JSON.parse(raw.text)).toEqual({ ...payload, header });
    noSecretIn(raw.text);
  });

  it("keeps no workflow token of a Slack function_executed event (event.bot_access_token), in R2 or on the way out", async () => {
    const event = { type: "function_executed", function: { id: "Fn1", callback_id: "sample_function", type: "app" }, inputs: { user_id: "U42" }, function_execution_id: "Fx1", workflow_execution_id: "Wx1", event_ts: `${++ts}.000400`, bot_access_token: SLACK_WORKFLOW_TOKEN };
    await postSlack({ token: SLACK_LEGACY_TOKEN, team_id: "T1", api_app_id: "A1", type: "event_callback", event_id: "EvFUNC1", event_time: 1_700_000_300, authorizations: [{ team_id: "T1", user_id: "UBOT", is_bot: true }], event });
    const eventId = `slack:${bots.slack.botId}:EvFUNC1`;
    const raw = await readRaw(eventId);
    expect(raw.status).toBe(200);
    const { bot_access_token: _workflowToken, ...rest } = event;
    expect(JSON.parse(raw.text).event).toEqual(rest);
    noSecretIn(raw.text);
    const [{ raw_ref: rawRef }] = await host.query<{ raw_ref: string }>("SELECT raw_ref FROM event_log WHERE event_id = ?", [eventId]);
    noSecretIn(new TextDecoder().decode((await host.r2Object(rawRef))!));
  });

  it("keeps no Slack secret at any depth: a user context's secret in a function's inputs or an interactivity, a token or response_url nested", async () => {
    const userContext = { id: "U42", secret: SLACK_USER_CONTEXT_SECRET };
    const interactivity = { interactor: userContext, interactivity_pointer: "1234567890123.4567890123456.78a90bc12d3e4f567g" };
    // A workflow step whose inputs name who started it (an interactivity) and who approves (a user context).
    const event = { type: "function_executed", function: { id: "Fn2", callback_id: "approve", type: "app" }, inputs: { interactivity, approver: userContext, note: "ship it" }, function_execution_id: "Fx2", workflow_execution_id: "Wx2", event_ts: `${++ts}.000500`, bot_access_token: SLACK_WORKFLOW_TOKEN };
    await postSlack({ token: SLACK_LEGACY_TOKEN, team_id: "T1", api_app_id: "A1", type: "event_callback", event_id: "EvFUNC2", event_time: 1_700_000_301, authorizations: [{ team_id: "T1", user_id: "UBOT", is_bot: true }], event });
    // A press within that step's modal: its function's inputs and interactivity come along, and a view's response_urls nest theirs.
    const press = {
      type: "block_actions",
      token: SLACK_LEGACY_TOKEN,
      trigger_id: "raw.trigger.function.1",
      user: { id: "U42", username: "ada", team_id: "T1" },
      team: { id: "T1" },
      container: { type: "view", view_id: "V1" },
      actions: [{ type: "button", action_id: "approve", block_id: "b1", value: "yes" }],
      function_data: { execution_id: "Fx2", function: { callback_id: "approve" }, inputs: { approver: userContext } },
      interactivity,
      bot_access_token: SLACK_WORKFLOW_TOKEN,
      view: { id: "V1", state: { values: {} }, response_urls: [{ block_id: "b1", action_id: "approve", channel_id: "C1", response_url: SLACK_RESPONSE_URL }] },
    };
    await postSlack(press, true);

    const shown = { approver: { id: "U42" }, interactivity: { interactor: { id: "U42" }, interactivity_pointer: interactivity.interactivity_pointer } };
    for (const [eventId, expected] of [
      [`slack:${bots.slack.botId}:EvFUNC2`, (b: Record<string, unknown>) => expect(b.event).toEqual({ ...event, bot_access_token: undefined, inputs: { ...shown, note: "ship it" } })],
      [`slack:${bots.slack.botId}:interaction:${press.trigger_id}`, (b: Record<string, unknown>) => expect(b).toEqual({ ...press, token: undefined, bot_access_token: undefined, interactivity: shown.interactivity, function_data: { ...press.function_data, inputs: { approver: shown.approver } }, view: { id: "V1", state: { values: {} } } })],
    ] as const) {
      const raw = await readRaw(eventId);
      expect(raw.status).toBe(200);
      noSecretIn(raw.text);
      expected(JSON.parse(raw.text));
      // Nor kept in R2.
      const [{ raw_ref: rawRef }] = await host.query<{ raw_ref: string }>("SELECT raw_ref FROM event_log WHERE event_id = ?", [eventId]);
      noSecretIn(new TextDecoder().decode((await host.r2Object(rawRef))!));
    }
  });

  it("gives a Discord interaction without its token, and a Telegram update byte for byte", async () => {
    const interaction = { id: "1300000000000000001", application_id: "99887766554433", type: 2, token: DISCORD_INTERACTION_TOKEN, version: 1, channel_id: "555", guild_id: "777", member: { user: { id: "42", username: "ada" }, nick: null }, data: { id: "1", name: "ask", type: 1, options: [{ name: "question", type: 3, value: "hi" }] } };
    expect((await postInteraction(bots.discord.url, discordKey.privateKey, interaction)).status).toBe(200);
    const discord = await readRaw(`discord:${bots.discord.botId}:${interaction.id}`);
    expect(discord.status).toBe(200);
    const { token: _token, ...sent } = interaction;
    expect(discord.text).toBe(JSON.stringify(sent));
    noSecretIn(discord.text);

    const telegram = await postTelegram("what did telegram send?");
    const raw = await readRaw(telegram.eventId);
    expect(raw).toEqual({ status: 200, contentType: "application/json", text: telegram.body });
  });

  it("is a 404 not_found for an event never recorded, one without a payload (an API event), and one whose payload is gone", async () => {
    const telegram = await postTelegram("soon gone", -701);
    expect((await readRaw(telegram.eventId)).status).toBe(200);
    const [{ raw_ref: rawRef }] = await host.query<{ raw_ref: string }>("SELECT raw_ref FROM event_log WHERE event_id = ?", [telegram.eventId]);
    await host.r2Delete(rawRef);
    const gone = await readRaw(telegram.eventId);
    expect(gone.status).toBe(404);
    expect(JSON.parse(gone.text).error).toMatchObject({ code: "not_found", message: expect.stringContaining("no longer stored") });

    const api = await host.postEvent(messageEvent("raw-api-conv", "sent through the API", { event_id: "raw-api-evt-1" }));
    expect(api.status).toBe(202);
    const none = await readRaw("raw-api-evt-1");
    expect(none.status).toBe(404);
    expect(JSON.parse(none.text).error).toMatchObject({ code: "not_found", message: expect.stringContaining("no raw payload") });
    const unknown = await readRaw(`telegram:${bots.telegram.botId}:1`);
    expect(unknown.status).toBe(404);
    expect(JSON.parse(unknown.text).error.code).toBe("not_found");
  });
});

describe("from a platform event to what the host did with it", () => {
  it("reads the conversation's records after the event, oldest first: its run's delivery, then whatever is recorded next", async () => {
    const event = { type: "message", channel: "C_TRAIL", channel_type: "channel", user: "U42", text: "trail me", ts: `${++ts}.000300`, team: "T1" };
    await postSlack({ token: SLACK_LEGACY_TOKEN, team_id: "T1", api_app_id: "A1", type: "event_callback", event_id: "EvTRAIL1", event_time: 1_700_000_200, authorizations: [{ team_id: "T1", user_id: "UBOT", is_bot: true }], event });
    const recorded = (await host.admin("GET", `/v1/events/slack:${bots.slack.botId}:msg:C_TRAIL:${event.ts}`)).body;
    expect(recorded).toMatchObject({ disposition: "bound", run_id: expect.any(String), raw_ref: expect.any(String), cursor: expect.any(String) });
    const run = await host.waitForRun(recorded.run_id);
    expect(run.event_id).toBe(recorded.event_id);

    // The run's view names its conversation as the conversation reads take it; the event's cursor is where to start.
    const where = new URLSearchParams({ conversation_id: String(run.conversation_id), bot_id: String(run.bot_id) });
    const after = (cursor: string) => host.admin("GET", `/v1/conversations/events?${where}&after_cursor=${encodeURIComponent(cursor)}&limit=50`);
    const page = await waitFor(async () => {
      const p = (await after(recorded.cursor)).body;
      return p.items.some((i: { event_type: string }) => i.event_type === "delivery.succeeded") && p;
    });
    const types = page.items.map((i: { event_type: string }) => i.event_type);
    expect(types.indexOf("delivery.attempted")).toBeLessThan(types.indexOf("delivery.succeeded"));
    const trail = page.items.filter((i: { event_type: string }) => i.event_type.startsWith("delivery."));
    expect(trail.map((i: { run_id: string; data: Record<string, unknown> }) => [i.run_id, i.data.event_id])).toEqual(trail.map(() => [recorded.run_id, recorded.event_id]));
    // Oldest first, all after the event.
    const seqs = page.items.map((i: { seq: number }) => i.seq);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
    expect(seqs[0]).toBeGreaterThan(recorded.seq);
    expect(page.has_more).toBe(false);

    // Its next_cursor is where the next record will be: followed, it gives the next message and nothing before it.
    const next = { ...event, text: "and then", ts: `${++ts}.000300` };
    await postSlack({ token: SLACK_LEGACY_TOKEN, team_id: "T1", api_app_id: "A1", type: "event_callback", event_id: "EvTRAIL2", event_time: 1_700_000_201, authorizations: [{ team_id: "T1", user_id: "UBOT", is_bot: true }], event: next });
    const followed = (await after(page.next_cursor)).body;
    expect(followed.items[0]).toMatchObject({ event_id: `slack:${bots.slack.botId}:msg:C_TRAIL:${next.ts}`, event_type: "message.received" });
    // Both ways at once is not a page: a 400, not one silently ignored.
    const both = await host.admin("GET", `/v1/conversations/events?${where}&after_cursor=${encodeURIComponent(recorded.cursor)}&cursor=${encodeURIComponent(recorded.cursor)}`);
    expect(both.status).toBe(400);
  });
});

describe("retention", () => {
  it("takes an event's payload with its record: the raw read is then a 404 not_found", async () => {
    const telegram = await postTelegram("kept a day", -702);
    expect((await readRaw(telegram.eventId)).status).toBe(200);
    await host.triggerScheduled({ scheduledTime: new Date(Date.now() + 2 * DAY_MS) });
    const swept = await readRaw(telegram.eventId);
    expect(swept.status).toBe(404);
    expect(JSON.parse(swept.text).error.code).toBe("not_found");
  });
});
