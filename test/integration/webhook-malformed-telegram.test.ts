/**
 * Telegram updates that carry the right secret token but not the shape the Bot API documents: each is answered as
 * Telegram needs (200, so it is not sent again and again) and recorded with its payload for the operator, or refused
 * with a clear 4xx when it cannot be read at all; never a 500, never an unhandled error in the Worker's log.
 */
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { addTelegramBot, startChatRunner, startFakePlatform, telegramBotApi } from "../support/fake-platform";
import { deliver, expectEachHandled, expectHandled, INVALID_JSON, nestedJson, type MalformedRow } from "../support/malformed-webhooks";

const BOT_TOKEN = "5151:malformed-telegram-token";
const SECRET_TOKEN = "malformed_tg_secret_0123456789";
const SECRETS = [BOT_TOKEN, SECRET_TOKEN];

let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startChatRunner>>;
let bot: { botId: string; webhookUrl: string };

beforeAll(async () => {
  fake = await startFakePlatform(telegramBotApi(BOT_TOKEN));
  runner = await startChatRunner("malformed-telegram");
  host = await startTestHost({ captureLogs: true });
  bot = await addTelegramBot(host, { apiBaseUrl: fake.url, botToken: BOT_TOKEN, secretToken: SECRET_TOKEN }, { runner, agentId: "malformed-telegram-agent" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

const post = (body: string | Buffer, headers: Record<string, string> = {}) => () =>
  fetch(bot.webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": SECRET_TOKEN, ...headers }, body });

let updateId = 61_000;
const now = () => Math.floor(Date.now() / 1000);
/** An update whose message is Ada's "hi" in a private chat, but for the fields given (undefined leaves one out). */
const message = (fields: Record<string, unknown>) =>
  JSON.stringify({ update_id: ++updateId, message: { message_id: updateId, date: now(), chat: { id: 610, type: "private" }, from: { id: 42, is_bot: false, first_name: "Ada" }, text: "hi", ...fields } });

const rows: MalformedRow[] = [
  { name: "a JSON null", body: () => "null" },
  { name: "a JSON array", body: () => "[1, 2]" },
  { name: "an object with no update_id", body: () => "{}" },
  { name: "update_id as a string", body: () => JSON.stringify({ update_id: "77", message: { message_id: 1, date: now(), chat: { id: 610, type: "private" }, text: "x" } }) },
  { name: "update_id a float past 2^53", body: () => '{"update_id": 1e300}' },
  { name: "a duplicated key", body: () => `{"update_id": ${++updateId}, "update_id": ${++updateId}, "message": {"message_id": 1, "date": ${now()}, "chat": {"id": 610, "type": "private"}, "text": "twice"}}` },
  { name: "message null", body: () => JSON.stringify({ update_id: ++updateId, message: null }) },
  { name: "an update kind nobody knows", body: () => JSON.stringify({ update_id: ++updateId, some_future_update: { chat: { id: 610 } } }) },
  { name: "chat.id as a string", body: () => message({ chat: { id: "610", type: "private" } }) },
  { name: "text as a number", body: () => message({ text: 5 }) },
  { name: "text empty", body: () => message({ text: "" }) },
  { name: "text with a lone surrogate and a NUL", body: () => message({ text: "a\ud800b\u0000c" }) },
  { name: "text with RTL override and zero-width characters", body: () => message({ text: "\u202eabc\u200b\u200d\ufeff" }) },
  { name: "text of 600,000 characters", body: () => message({ text: "x".repeat(600_000) }) },
  { name: "entities of every wrong kind", body: () => message({ text: "/start@x hi", entities: [{ type: "bot_command", offset: 0, length: 9999 }, { type: "mention", offset: -3, length: 2 }, null, 5] }) },
  { name: "from null", body: () => message({ from: null }) },
  { name: "new_chat_members holding null", body: () => message({ text: undefined, new_chat_members: [null] }) },
  { name: "photo an empty array", body: () => message({ text: undefined, photo: [] }) },
  { name: "reply_to_message of wrong types", body: () => message({ reply_to_message: { message_id: 5, date: "x", chat: 5, text: 7, photo: "x" } }) },
  { name: "callback_query of wrong types", body: () => JSON.stringify({ update_id: ++updateId, callback_query: { id: 5, from: null, message: "x", data: { a: 1 } } }) },
  { name: "edited_message with edit_date a string", body: () => JSON.stringify({ update_id: ++updateId, edited_message: { message_id: 1, date: now(), edit_date: "x", chat: { id: 610, type: "private" }, text: "e" } }) },
  { name: "a field nested 120 levels deep", body: () => message({ extra: "@@" }).replace('"@@"', nestedJson(120)) },
  { name: "a field nested 50,000 levels deep", body: () => message({ extra: "@@" }).replace('"@@"', nestedJson(50_000)), refused: INVALID_JSON },
  { name: "a body cut short", body: () => message({}).slice(0, 40), refused: INVALID_JSON },
];

describe("Telegram: a signed update of the wrong shape", () => {
  it("is acknowledged 200 and recorded with its payload, or refused 400 when it cannot be read; never a 500", async () => {
    // Telegram's payload carries no secret of ours: kept as its JSON said it.
    await expectEachHandled(host, bot.botId, rows, { send: (body) => post(body), secrets: SECRETS, stored: (body) => JSON.parse(body) });
  });

  it("nested deeper than any update is says so in its refusal", async () => {
    const d = await deliver(host, bot.botId, post(message({ extra: "@@" }).replace('"@@"', nestedJson(200))));
    expectHandled(d, SECRETS);
    expect(d.status).toBe(400);
    expect(JSON.parse(d.text).error).toEqual({ code: "invalid_json", message: "request body is JSON nested deeper than 128 levels" });
  });

  it("a compressed body is refused 415 as such, not as JSON it could not read", async () => {
    const d = await deliver(host, bot.botId, post(gzipSync(message({ text: "compressed?" })), { "content-encoding": "gzip" }));
    expectHandled(d, SECRETS);
    expect(d.status).toBe(415);
    expect(JSON.parse(d.text).error).toEqual({ code: "unsupported_media_type", message: "a body in Content-Encoding gzip is not read: send it uncompressed" });
    expect(d.recorded).toEqual([]);
  });

  it("a Content-Encoding that compresses nothing (a sender's mislabel) is read as sent", async () => {
    const d = await deliver(host, bot.botId, post(message({ text: "labelled utf-8" }), { "content-encoding": "utf-8" }));
    expectHandled(d, SECRETS);
    expect(d.status).toBe(200);
    expect(d.recorded.map((r) => r.event_type)).toEqual(["message.received"]);
  });
});
