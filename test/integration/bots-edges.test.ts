import { createHmac } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { startChatRunner, startFakePlatform, waitFor, type FakeReply, type PlatformCall } from "../support/fake-platform";
import { SLACK_AUTH_TEST } from "../support/slack-events";

/**
 * Bots and their platforms at the edges: updates the host does not handle recorded in their chat, the bot's own
 * arrival not welcomed, messages without words not run, a bot id reused on another platform, PUT racing DELETE or a
 * credential rotation, weak Lark tokens, and a GET view sent back with PUT.
 */
const TG_TOKEN = "123456:BOTSJ-telegram-bot-token-abcd";
const TG_SECRET = "botsj-secret-token-0123456789";
/** Another Telegram bot's token: the one a bot id registered again takes. */
const TG_OTHER_TOKEN = "654321:BOTSJ-another-telegram-bot-token";
const SLACK_TOKEN = "xoxb-botsj-slack-bot-token";
const SLACK_SIGNING = "botsj-slack-signing-secret-0123";

let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startChatRunner>>;
let nextId = 5000;

/** One fake answering both Telegram-shaped (/bot<token>/method) and Slack-shaped (/chat.postMessage) calls. */
function api(call: PlatformCall): FakeReply {
  // Who the bot token is (its workspace T1, as the envelopes say): the host checks every request against it.
  if (call.path === "/auth.test") return { json: SLACK_AUTH_TEST };
  if (call.path.startsWith("/bot")) return { json: { ok: true, result: { message_id: ++nextId } } };
  if (call.path === "/chat.postMessage") return { json: { ok: true, channel: call.body.channel, ts: `${++nextId}.0001` } };
  if (call.path === "/chat.update") return { json: { ok: true } };
  return { status: 404, json: { ok: false } };
}

beforeAll(async () => {
  fake = await startFakePlatform(api);
  runner = await startChatRunner("botsj-chat");
  host = await startTestHost({ captureLogs: true });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

let updateId = 70_000;
function tgUpdate(chatId: string, message: Record<string, unknown>, kind = "message") {
  const id = ++updateId;
  return { update_id: id, [kind]: { message_id: id, date: Math.floor(Date.now() / 1000), chat: { id: Number(chatId), type: "supergroup", title: "g" }, from: { id: 42, is_bot: false, first_name: "Ada" }, ...message } };
}
async function postTelegram(url: string, body: unknown) {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": TG_SECRET }, body: JSON.stringify(body) });
  return { status: res.status, text: await res.text() };
}
async function postSlack(url: string, payload: unknown) {
  const body = JSON.stringify(payload);
  const ts = Math.floor(Date.now() / 1000);
  const sig = `v0=${createHmac("sha256", SLACK_SIGNING).update(`v0:${ts}:${body}`).digest("hex")}`;
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json", "x-slack-request-timestamp": String(ts), "x-slack-signature": sig }, body });
  return { status: res.status, text: await res.text() };
}

const recordedIn = (conversationId: string, source: string) =>
  host.query<{ event_type: string; source_event_type: string | null; run_id: string | null }>("SELECT event_type, source_event_type, run_id FROM event_log WHERE conversation_id = ? AND source = ?", [conversationId, source]);

async function telegramBot(botId: string, eventTypes = ["message.received"]) {
  const created = await host.admin("POST", "/v1/admin/bots", { bot_id: botId, platform: "telegram", api_base_url: fake.url, credentials: { bot_token: TG_TOKEN, secret_token: TG_SECRET } });
  expect(created.status).toBe(201);
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: `agent-${botId}`, scope: { type: "bot", id: botId }, eventTypes });
  return created.body as { bot_id: string; webhook_url: string };
}

describe("Telegram unhandled updates", () => {
  it("records an edited message in its chat's EventLog, like Slack's message_changed", async () => {
    const bot = await telegramBot("rj-edit");
    const edited = tgUpdate("-300100", { text: "fixed typo", edit_date: Math.floor(Date.now() / 1000) }, "edited_message");
    expect((await postTelegram(bot.webhook_url, edited)).status).toBe(200);
    const [row] = await host.query<{ event_type: string; source_event_type: string; conversation_id: string | null }>("SELECT event_type, source_event_type, conversation_id FROM event_log WHERE event_id = ?", [`telegram:rj-edit:${edited.update_id}`]);
    expect(row).toMatchObject({ event_type: "platform.unhandled", source_event_type: "edited_message" });
    const log = await host.admin("GET", `/v1/conversations/events?conversation_id=-300100&bot_id=rj-edit`);
    expect(log.status).toBe(200);
    expect(log.body.items.map((e: any) => e.event_id)).toContain(`telegram:rj-edit:${edited.update_id}`);
  });
});

describe("the bot's own join", () => {
  it("Telegram: the bot being added to a group is not welcomed by its own agent", async () => {
    const bot = await telegramBot("rj-join", ["group.member_joined"]);
    // Telegram's bot user id is the token's prefix: 123456.
    const added = tgUpdate("-300200", { new_chat_members: [{ id: 123456, is_bot: true, first_name: "ReviewBot", username: "review_bot" }] });
    expect((await postTelegram(bot.webhook_url, added)).status).toBe(200);
    // Recorded before the webhook answered: not handled, so nothing runs and nothing is sent.
    expect(await recordedIn("-300200", "telegram")).toEqual([{ event_type: "platform.unhandled", source_event_type: "new_chat_members.self", run_id: null }]);
  });
});

describe("the bot's own join (Slack)", () => {
  it("Slack: the app's own bot user joining a channel is not welcomed by its own agent", async () => {
    const created = await host.admin("POST", "/v1/admin/bots", { bot_id: "rj-slack-join", platform: "slack", api_base_url: fake.url, credentials: { bot_token: SLACK_TOKEN, signing_secret: SLACK_SIGNING } });
    expect(created.status).toBe(201);
    await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "agent-rj-slack-join", scope: { type: "bot", id: "rj-slack-join" }, eventTypes: ["group.member_joined"] });
    // Slack names the app's bot user in every envelope's `authorizations`.
    const payload = {
      type: "event_callback",
      team_id: "T1",
      event_id: "EvRJJOIN1",
      event_time: Math.floor(Date.now() / 1000),
      authorizations: [{ enterprise_id: null, team_id: "T1", user_id: "UBOTSELF", is_bot: true, is_enterprise_install: false }],
      event: { type: "member_joined_channel", user: "UBOTSELF", channel: "C300500", channel_type: "C", team: "T1", inviter: "U42" },
    };
    expect((await postSlack(created.body.webhook_url, payload)).status).toBe(200);
    expect(await recordedIn("C300500", "slack")).toEqual([{ event_type: "platform.unhandled", source_event_type: "member_joined_channel.self", run_id: null }]);
  });

  it("Slack: a person an installation's authorizations name (a user token, is_bot false) joining is a join like any other", async () => {
    const payload = {
      type: "event_callback",
      team_id: "T1",
      event_id: "EvRJJOIN2",
      event_time: Math.floor(Date.now() / 1000),
      authorizations: [
        { enterprise_id: null, team_id: "T1", user_id: "UBOTSELF", is_bot: true, is_enterprise_install: false },
        { enterprise_id: null, team_id: "T1", user_id: "UPERSON", is_bot: false, is_enterprise_install: false },
      ],
      event: { type: "member_joined_channel", user: "UPERSON", channel: "C300501", channel_type: "C", team: "T1", inviter: "U42" },
    };
    const bot = await host.admin("GET", "/v1/admin/bots/rj-slack-join");
    expect((await postSlack(bot.body.webhook_url, payload)).status).toBe(200);
    // Recorded before the webhook answered, and taken by the bot's agent.
    const [joined] = await recordedIn("C300501", "slack");
    expect(joined).toMatchObject({ event_type: "group.member_joined", source_event_type: "member_joined_channel", run_id: expect.any(String) });
  });
});

describe("Lark fields sent as null", () => {
  it("reads a message whose optional fields Lark sends as null as one that omits them (README: null counts as absent)", async () => {
    const created = await host.admin("POST", "/v1/admin/bots", { bot_id: "rj-lark-null", platform: "lark", api_base_url: fake.url, credentials: { app_id: "cli_rj", app_secret: "rj-lark-app-secret", verification_token: "rj-lark-verification-token" } });
    expect(created.status).toBe(201);
    const payload = {
      schema: "2.0",
      header: { event_id: "rj_lark_null_1", event_type: "im.message.receive_v1", create_time: String(Date.now()), token: "rj-lark-verification-token", app_id: "cli_rj", tenant_key: "t1" },
      event: {
        sender: { sender_id: { open_id: "ou_1", union_id: "on_1", user_id: null }, sender_type: "user", tenant_key: "t1" },
        message: { message_id: "om_rj_1", root_id: null, parent_id: null, thread_id: null, chat_id: "oc_rj_1", chat_type: "p2p", message_type: "text", content: JSON.stringify({ text: "hello" }), mentions: null },
      },
    };
    const res = await fetch(created.body.webhook_url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(payload) });
    expect(res.status).toBe(200);
    const [row] = await host.query<{ event_type: string }>("SELECT event_type FROM event_log WHERE event_id = 'lark:rj-lark-null:rj_lark_null_1'");
    expect(row.event_type).toBe("message.received");
  });
});

describe("Slack message without words or files", () => {
  it("does not start a run with empty input (a forwarded message: text '' plus a shared attachment)", async () => {
    const created = await host.admin("POST", "/v1/admin/bots", { bot_id: "rj-slack-empty", platform: "slack", api_base_url: fake.url, credentials: { bot_token: SLACK_TOKEN, signing_secret: SLACK_SIGNING } });
    expect(created.status).toBe(201);
    await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "agent-rj-slack-empty", scope: { type: "bot", id: "rj-slack-empty" } });
    const payload = {
      type: "event_callback",
      team_id: "T1",
      event_id: "EvRJEMPTY1",
      event_time: Math.floor(Date.now() / 1000),
      event: { type: "message", channel: "C300300", channel_type: "channel", user: "U42", text: "", ts: "1800000001.000100", attachments: [{ is_share: true, text: "the forwarded words", author_name: "Bob" }] },
    };
    expect((await postSlack(created.body.webhook_url, payload)).status).toBe(200);
    // As Telegram and Lark record a message without text or files: not handled, nothing runs.
    expect(await recordedIn("C300300", "slack")).toEqual([{ event_type: "platform.unhandled", source_event_type: "message", run_id: null }]);
  });
});

describe("a bot id re-registered on another platform", () => {
  it("a queued run of the deleted Telegram bot is not answered with the new Slack bot's credentials", async () => {
    const bot = await telegramBot("rj-swap");
    // The first run keeps the conversation busy; the second waits its turn (enqueue) and starts after the swap.
    expect((await postTelegram(bot.webhook_url, tgUpdate("-300400", { text: "sleep 2500" }))).status).toBe(200);
    expect((await postTelegram(bot.webhook_url, tgUpdate("-300400", { text: "second" }))).status).toBe(200);
    await waitFor(() => runner.contexts.some((c) => c.input.text === "sleep 2500"), 10_000, "the first run");
    expect((await host.admin("DELETE", "/v1/admin/bots/rj-swap")).status).toBe(204);
    const again = await host.admin("POST", "/v1/admin/bots", { bot_id: "rj-swap", platform: "slack", api_base_url: fake.url, credentials: { bot_token: SLACK_TOKEN, signing_secret: SLACK_SIGNING } });
    expect(again.status).toBe(201);
    const ctx = await waitFor(() => runner.contexts.find((c) => c.input.text === "second"), 15_000, "the second run");
    await host.waitForRun(ctx.run_id);
    await new Promise((r) => setTimeout(r, 1500));
    const withSlackToken = fake.calls.filter((c) => c.path.includes(SLACK_TOKEN));
    expect(withSlackToken.map((c) => `${c.method} ${c.path.replace(SLACK_TOKEN, "<slack bot token>")}`)).toEqual([]);
  });
});

describe("a bot id re-registered on the same platform", () => {
  it("a queued run of the deleted bot is not sent with the new registration's token: recorded as not delivered, bot_replaced", async () => {
    const bot = await telegramBot("rj-reuse");
    // The first run keeps the conversation busy; the second waits its turn (enqueue) and starts after the re-registration.
    expect((await postTelegram(bot.webhook_url, tgUpdate("-300410", { text: "sleep 2500" }))).status).toBe(200);
    expect((await postTelegram(bot.webhook_url, tgUpdate("-300410", { text: "after reuse" }))).status).toBe(200);
    await waitFor(() => runner.contexts.some((c) => c.input.text === "sleep 2500" && c.conversation.bot_id === "rj-reuse"), 10_000, "the first run");
    expect((await host.admin("DELETE", "/v1/admin/bots/rj-reuse")).status).toBe(204);
    // Another Telegram bot (another token: maybe another account) under the same id.
    const again = await host.admin("POST", "/v1/admin/bots", { bot_id: "rj-reuse", platform: "telegram", api_base_url: fake.url, credentials: { bot_token: TG_OTHER_TOKEN, secret_token: TG_SECRET } });
    expect(again.status).toBe(201);
    const ctx = await waitFor(() => runner.contexts.find((c) => c.input.text === "after reuse"), 15_000, "the second run");
    await host.waitForRun(ctx.run_id);
    const failed = await waitFor(async () => {
      const rows = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE run_id = ? AND event_type = 'delivery.failed'", [ctx.run_id]);
      return rows.map((r) => JSON.parse(r.data_json)).find((d) => d.will_retry === false);
    }, 10_000, "the reply given up on");
    expect(failed).toMatchObject({ code: "bot_replaced", bot_id: "rj-reuse" });
    expect(fake.calls.filter((c) => c.path.includes(TG_OTHER_TOKEN)).map((c) => c.path.replace(TG_OTHER_TOKEN, "<new token>"))).toEqual([]);
    // Not the new bot's failure to explain: its view shows none.
    expect((await host.admin("GET", "/v1/admin/bots/rj-reuse")).body.last_delivery_failure).toBeUndefined();
  });

  it("an edit under the new registration changes its own message only, never the deleted bot's message of the same id in the same private chat", async () => {
    // Telegram numbers a private chat's messages per bot: another bot's chat with the same person starts again.
    const chat = { id: 300_420, type: "private", first_name: "Ada" };
    const old = await telegramBot("rj-reuse-edit");
    expect((await postTelegram(old.webhook_url, tgUpdate("300420", { message_id: 7, chat, text: "words to the old bot" }))).status).toBe(200);
    await waitFor(() => runner.contexts.some((c) => c.input.text === "words to the old bot"), 10_000, "the old bot's run");
    expect((await host.admin("DELETE", "/v1/admin/bots/rj-reuse-edit")).status).toBe(204);
    const again = await host.admin("POST", "/v1/admin/bots", { bot_id: "rj-reuse-edit", platform: "telegram", api_base_url: fake.url, credentials: { bot_token: TG_OTHER_TOKEN, secret_token: TG_SECRET } });
    expect(again.status).toBe(201);
    expect((await postTelegram(again.body.webhook_url, tgUpdate("300420", { message_id: 7, chat, text: "words to the new bot" }))).status).toBe(200);
    const edit = tgUpdate("300420", { message_id: 7, chat, text: "words to the new bot, edited", edit_date: Math.floor(Date.now() / 1000) + 1 }, "edited_message");
    expect((await postTelegram(again.body.webhook_url, edit)).status).toBe(200);
    const items = await host.query<{ content: string }>("SELECT t.content FROM transcript t JOIN event_log e ON e.event_id = t.event_id WHERE e.bot_id = 'rj-reuse-edit' AND e.conversation_id = '300420' AND t.role = 'user' ORDER BY e.seq");
    expect(items.map((i) => i.content)).toEqual(["words to the old bot", "words to the new bot, edited"]);
  });
});

describe("PUT racing DELETE", () => {
  it("never answers 200 for a PUT that updated nothing because a concurrent DELETE removed the bot", async () => {
    // Every row the database really updates is noted, so a PUT's 200 can be checked against it.
    await host.query("CREATE TABLE IF NOT EXISTS rj_bot_updates (bot_id TEXT)");
    await host.query("CREATE TRIGGER IF NOT EXISTS rj_bot_updated AFTER UPDATE ON bot BEGIN INSERT INTO rj_bot_updates VALUES (NEW.bot_id); END");
    const lost: string[] = [];
    for (let i = 0; i < 15; i++) {
      const id = `rj-race-${i}`;
      expect((await host.admin("POST", "/v1/admin/bots", { bot_id: id, platform: "telegram", credentials: { bot_token: TG_TOKEN, secret_token: TG_SECRET } })).status).toBe(201);
      const [put] = await Promise.all([host.admin("PUT", `/v1/admin/bots/${id}`, { name: "renamed", api_base_url: "http://127.0.0.1:9" }), host.admin("DELETE", `/v1/admin/bots/${id}`)]);
      const updated = await host.query("SELECT 1 FROM rj_bot_updates WHERE bot_id = ?", [id]);
      if (put.status === 200 && updated.length === 0) lost.push(`${id}: PUT answered 200 ${JSON.stringify({ name: put.body.name })} but no row was updated`);
    }
    expect(lost).toEqual([]);
  });
});

describe("PUT racing a credential rotation", () => {
  it("a PUT that sends no credentials never restores the ones a concurrent PUT replaced", async () => {
    const reverted: string[] = [];
    for (let i = 0; i < 15; i++) {
      const id = `rj-rot-${i}`;
      expect((await host.admin("POST", "/v1/admin/bots", { bot_id: id, platform: "telegram", credentials: { bot_token: TG_TOKEN, secret_token: TG_SECRET } })).status).toBe(201);
      const rotated = "rotated-secret-token-0123456789";
      const [rename, rotate] = await Promise.all([
        host.admin("PUT", `/v1/admin/bots/${id}`, { name: "renamed" }),
        host.admin("PUT", `/v1/admin/bots/${id}`, { credentials: { bot_token: TG_TOKEN, secret_token: rotated } }),
      ]);
      expect(rotate.status === 200 || rotate.status === 409).toBe(true);
      if (rotate.status !== 200) continue;
      // The webhook authenticates with the stored secret token: which one is it now?
      const update = { update_id: 1, my_chat_member: {} };
      const old = await fetch(`${host.url}/v1/webhooks/telegram/${id}`, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": TG_SECRET }, body: JSON.stringify(update) });
      if (old.status === 200) reverted.push(`${id}: rotation answered 200, rename answered ${rename.status}, and the replaced secret token authenticates again`);
    }
    expect(reverted).toEqual([]);
  });
});

describe("Lark verification token strength", () => {
  it("refuses a one-character verification token, which would be all that authenticates a plain-mode webhook", async () => {
    const res = await host.admin("POST", "/v1/admin/bots", { platform: "lark", credentials: { app_id: "cli_x", app_secret: "s", verification_token: "x" } });
    expect(res.status).toBe(400);
  });
});

describe("PUT takes back what GET answered", () => {
  it("a bot's GET view sent back with PUT keeps the bot as it is", async () => {
    const created = await host.admin("POST", "/v1/admin/bots", { bot_id: "rj-roundtrip", platform: "telegram", name: "n", credentials: { bot_token: TG_TOKEN, secret_token: TG_SECRET } });
    const got = await host.admin("GET", "/v1/admin/bots/rj-roundtrip");
    const put = await host.admin("PUT", "/v1/admin/bots/rj-roundtrip", got.body);
    expect({ status: put.status, error: put.body?.error?.message }).toEqual({ status: 200, error: undefined });
    expect(created.status).toBe(201);
  });
});
