import { createHash } from "node:crypto";
import { PRESS_REPEAT_WINDOW_MS } from "../../durable-objects/repeated-presses";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost, recordedAnswer } from "../support/host";
import { settledRefusals } from "../support/settled-refusals";
import { addTelegramBot, ANSWER_FILE, fileOf, formOf, gapsBetween, longText, startChatRunner, startFakePlatform, waitFor, type FakeReply, type PlatformCall } from "../support/fake-platform";
import { largeFile } from "../support/host-api";
import { telegramHtmlProblem } from "../support/telegram-html";
import { TABLE_ANSWER, TABLE_ANSWER_TELEGRAM } from "../support/markdown-sample";

const BOT_TOKEN = "123456:TEST-telegram-bot-token-abcdefgh";
const SECRET_TOKEN = "tg-secret-token-0123456789";
const PHOTO = new Uint8Array([0xff, 0xd8, 0xff, 0xe0, 1, 2, 3, 4]);
/** Chats whose first sendMessage the fake refuses with 429, and the retry_after (seconds) it asks. */
const throttledChats = new Map<string, number>();
/** A chat whose sendMessage fails with an error that (wrongly) echoes the token. */
const LEAKY_CHAT = "-666";
/** A private chat whose user blocked the bot: Telegram refuses every send there with 403. */
const BLOCKED_CHAT = "4242";
/** A group that removed the bot while its runs went on: Telegram refuses every call there with 403. */
const KICKED_CHAT = "-1001999";
/** A group upgraded to a supergroup: Telegram refuses sends there and names the new chat. */
const UPGRADED_GROUP = "-102700";
const ITS_SUPERGROUP = "-1001027000001";
/** A group upgraded mid-reply, once two messages were posted there: every later call naming it is refused. */
const UPGRADED_MID_REPLY = "-102800";
const ITS_NEW_SUPERGROUP = "-1001028000001";
/** Groups and what they became, with how many more sends each takes before it is upgraded. */
const upgrades = new Map([
  [UPGRADED_GROUP, { to: ITS_SUPERGROUP, sendsLeft: 0 }],
  [UPGRADED_MID_REPLY, { to: ITS_NEW_SUPERGROUP, sendsLeft: 2 }],
]);
/** The bot's username, as getMe names it. */
const OUR_USERNAME = "OurTestBot";
/** Another bot of ours whose getMe fails: everything else answers as for BOT_TOKEN. */
const NO_GETME_TOKEN = "123457:TEST-telegram-bot-token-nogetme";
const FORGED_LINE = "telegram bot forged: getMe failed (forged)";
/** Chats whose first sendMessage the fake takes (and posts), then drops the connection without answering. */
const droppingChats = new Set<string>();
/** Chats whose first editMessageText is applied but its answer broken off after the status. */
const cutEditChats = new Set<string>();
/** Chats whose file uploads the fake refuses for good. */
const REFUSING_FILES = new Set(["-102600"]);
/** A chat where the fake cannot parse any formatted text (as for a converter bug): it takes plain text only. */
const REFUSING_HTML = "-103200";

let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startChatRunner>>;
let botId: string;
let webhookUrl: string;
let nextMessageId = 9000;
/** Every body the host answered in this file, to look for secrets. */
const answered: string[] = [];

function telegramApi(call: PlatformCall): FakeReply {
  const m = /^\/(file\/)?bot([^/]+)\/(.+)$/.exec(call.path);
  if (!m || (m[2] !== BOT_TOKEN && m[2] !== NO_GETME_TOKEN)) return { status: 401, json: { ok: false, error_code: 401, description: "Unauthorized" } };
  if (m[1]) return { bytes: PHOTO, headers: { "content-type": "image/jpeg" } };
  const method = m[3];
  // Its words would read as a line of the host's own log, were their line break written as it is.
  if (method === "getMe" && m[2] === NO_GETME_TOKEN) return { status: 502, json: { ok: false, error_code: 502, description: `Bad Gateway\n${FORGED_LINE}` } };
  if (method === "getMe") return { json: { ok: true, result: { id: 123456, is_bot: true, first_name: "Test", username: OUR_USERNAME } } };
  // A multipart upload names its chat in a form field, read by the tests themselves.
  const chat = String(call.body?.chat_id ?? /name="chat_id"\r\n\r\n([^\r]*)/.exec(call.raw)?.[1]);
  // As Telegram does: formatted text it cannot parse is refused, and nothing is posted or edited.
  const htmlProblem = call.body?.parse_mode === "HTML" ? (chat === REFUSING_HTML ? 'Unsupported start tag "b" at byte offset 0' : telegramHtmlProblem(String(call.body.text))) : null;
  if (htmlProblem !== null) return { status: 400, json: { ok: false, error_code: 400, description: `Bad Request: can't parse entities: ${htmlProblem}` } };
  const upgrade = upgrades.get(chat);
  if (upgrade?.sendsLeft === 0) return { status: 400, json: { ok: false, error_code: 400, description: "Bad Request: group chat was upgraded to a supergroup chat", parameters: { migrate_to_chat_id: Number(upgrade.to) } } };
  if (chat === KICKED_CHAT) return { status: 403, json: { ok: false, error_code: 403, description: "Forbidden: bot was kicked from the supergroup chat" } };
  if (method === "sendMessage") {
    if (upgrade) upgrade.sendsLeft--;
    if (chat === BLOCKED_CHAT) return { status: 403, json: { ok: false, error_code: 403, description: "Forbidden: bot was blocked by the user" } };
    if (chat === LEAKY_CHAT) return { status: 400, json: { ok: false, error_code: 400, description: `Bad Request: chat not found (bot ${BOT_TOKEN})` } };
    if (droppingChats.delete(chat)) return { drop: true };
    const retryAfter = throttledChats.get(chat);
    if (retryAfter !== undefined && throttledChats.delete(chat)) return { status: 429, json: { ok: false, error_code: 429, description: `Too Many Requests: retry after ${retryAfter}`, parameters: { retry_after: retryAfter } } };
    return { json: { ok: true, result: { message_id: ++nextMessageId, chat: { id: Number(chat) }, text: call.body.text } } };
  }
  if ((method === "sendPhoto" || method === "sendDocument") && REFUSING_FILES.has(chat)) return { status: 400, json: { ok: false, error_code: 400, description: "Bad Request: wrong file" } };
  if (method === "sendPhoto" || method === "sendDocument") return { json: { ok: true, result: { message_id: ++nextMessageId } } };
  if (method === "editMessageText" && cutEditChats.delete(chat)) return { cutBody: true, json: { ok: true, result: { message_id: call.body.message_id, text: call.body.text } } };
  if (method === "editMessageText") return { json: { ok: true, result: { message_id: call.body.message_id, text: call.body.text } } };
  // The Bot API serves a bot no file over 20 MB.
  if (method === "getFile" && String(call.body.file_id).endsWith("_too_big")) return { status: 400, json: { ok: false, error_code: 400, description: "Bad Request: file is too big" } };
  if (method === "getFile") return { json: { ok: true, result: { file_id: call.body.file_id, file_path: `photos/${call.body.file_id}.jpg` } } };
  if (method === "setWebhook") return { json: { ok: true, result: true } };
  if (method === "deleteWebhook") return { json: { ok: true, result: true, description: "Webhook was deleted" } };
  return { status: 404, json: { ok: false, error_code: 404, description: "Not Found" } };
}

beforeAll(async () => {
  fake = await startFakePlatform(telegramApi);
  runner = await startChatRunner("telegram-chat");
  host = await startTestHost({ captureLogs: true });
  const created = await host.admin("POST", "/v1/admin/bots", { platform: "telegram", name: "tg", api_base_url: fake.url, credentials: { bot_token: BOT_TOKEN, secret_token: SECRET_TOKEN } });
  expect(created.status).toBe(201);
  answered.push(JSON.stringify(created.body));
  botId = created.body.bot_id;
  webhookUrl = created.body.webhook_url;
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "tg-agent", scope: { type: "bot", id: botId }, eventTypes: ["message.received"] });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

let updateId = 1000;
function update(chatId: string, message: Record<string, unknown>, id = ++updateId) {
  return {
    update_id: id,
    message: { message_id: id * 10, date: Math.floor(Date.now() / 1000), chat: { id: Number(chatId), type: "supergroup", title: "Test group" }, from: { id: 42, is_bot: false, first_name: "Ada", username: "ada" }, ...message },
  };
}

async function post(body: unknown, secret: string | null = SECRET_TOKEN) {
  const res = await fetch(webhookUrl, { method: "POST", headers: { "content-type": "application/json", ...(secret === null ? {} : { "x-telegram-bot-api-secret-token": secret }) }, body: JSON.stringify(body) });
  const text = await res.text();
  answered.push(text);
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

const sendsTo = (chat: string) => fake.callsTo(/\/sendMessage$/).filter((c) => String(c.body.chat_id) === chat);
const editsOf = (chat: string) => fake.callsTo(/\/editMessageText$/).filter((c) => String(c.body.chat_id) === chat);
const contextFor = (text: string) => runner.contexts.filter((c) => c.input.text === text);

describe("Telegram: webhook in, reply out", () => {
  it("runs a verified message and replies in its chat, quoting it; the context names the real surface", async () => {
    const u = update("-100200", { text: "hello telegram" });
    const res = await post(u);
    expect(res).toEqual({ status: 200, body: { ok: true } });
    const [send] = await waitFor(() => sendsTo("-100200").length > 0 && sendsTo("-100200"), 15_000, "the reply");
    expect(send.body).toMatchObject({ chat_id: "-100200", text: "echo: hello telegram", reply_parameters: { message_id: u.message.message_id } });
    expect(send.body.message_thread_id).toBeUndefined();

    const [ctx] = contextFor("hello telegram");
    expect(ctx.event).toMatchObject({ event_id: `telegram:${botId}:${u.update_id}`, event_type: "message.received", source: "telegram", source_event_type: "message" });
    expect(ctx.trigger.source).toBe("platform");
    expect(ctx.conversation).toMatchObject({ conversation_id: "-100200", thread_id: null, bot_id: botId, sender_id: "42" });
    expect(ctx.actor).toMatchObject({ actor_type: "user", actor_id: "42", actor_name: "Ada" });
    expect(ctx.delivery).toEqual({
      surface: "telegram",
      reply_target: { chat_id: "-100200", message_thread_id: null, reply_to_message_id: u.message.message_id },
      supports_streaming: true,
      supports_edit: true,
      supports_reaction: false,
      max_message_size: 4096,
      platform_capabilities: { threads: "forum_topics", reply_quotes: true, files: { max_bytes: 50_000_000 } },
    });
    // The raw update is in R2, referenced, never inlined.
    const raw = await host.r2Object(ctx.event.raw_ref);
    expect(JSON.parse(new TextDecoder().decode(raw!))).toEqual(u);

    // The delivery trail: attempted then succeeded, with the platform's message id.
    const trail = await waitFor(async () => {
      const rows = await host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type LIKE 'delivery.%' ORDER BY seq", [ctx.run_id]);
      return rows.length >= 2 && rows;
    });
    expect(trail.map((r) => r.event_type)).toEqual(["delivery.attempted", "delivery.succeeded"]);
    expect(JSON.parse(trail[1].data_json)).toMatchObject({ platform: "telegram", bot_id: botId, operation: "send", part: 1, attempt: 1, message_id: String(messageIdOf(send)) });
  });

  it("keeps a forum topic as the thread and replies into it", async () => {
    await post(update("-100300", { text: "in a topic", message_thread_id: 77, is_topic_message: true }));
    const [send] = await waitFor(() => sendsTo("-100300").length > 0 && sendsTo("-100300"));
    expect(send.body).toMatchObject({ message_thread_id: 77, text: "echo: in a topic" });
    expect(contextFor("in a topic")[0].conversation).toMatchObject({ conversation_id: "-100300", thread_id: "77" });
  });

  it("follows a group upgraded to a supergroup: the reply goes to the chat id Telegram names", async () => {
    await post(update(UPGRADED_GROUP, { text: "hello old group" }));
    const [reply] = await waitFor(() => sendsTo(ITS_SUPERGROUP).length > 0 && sendsTo(ITS_SUPERGROUP), 15_000, "the reply in the supergroup");
    expect(reply.body.text).toBe("echo: hello old group");
    expect(sendsTo(UPGRADED_GROUP)).toHaveLength(1);
    // The user's message is the group's: its id names another message in the supergroup, which must not be quoted.
    expect(sendsTo(UPGRADED_GROUP)[0].body.reply_parameters).toMatchObject({ message_id: expect.any(Number) });
    expect(reply.body.reply_parameters).toBeUndefined();
  });

  it("follows a group upgraded mid-reply for the reply's next posts, but edits each message only in the chat it was posted in", async () => {
    // A draft of two messages posted in the group, which is upgraded then; the final text fits in one message.
    await post(update(UPGRADED_MID_REPLY, { text: "shrink 3000" }));
    const [final] = await waitFor(() => sendsTo(ITS_NEW_SUPERGROUP).length > 0 && sendsTo(ITS_NEW_SUPERGROUP), 15_000, "the final text in the supergroup");
    expect(final.body.text).toBe("short final");
    const drafts = sendsTo(UPGRADED_MID_REPLY);
    const runId = contextFor("shrink 3000")[0].run_id;
    await host.waitForRun(runId);
    const superseded = await waitFor(() => fake.callsTo(/\/editMessageText$/).find((c) => c.body.text === "…" && c.body.message_id === messageIdOf(drafts[1])), 10_000, "the second draft message superseded");
    // Its message ids are the group's: editing them in the supergroup would change other messages there.
    expect(superseded.body.chat_id).toBe(UPGRADED_MID_REPLY);
    expect(editsOf(ITS_NEW_SUPERGROUP)).toEqual([]);
    expect(new Set(editsOf(UPGRADED_MID_REPLY).map((c) => c.body.message_id))).toEqual(new Set(drafts.map(messageIdOf)));
    // Once an edit named the supergroup, the final text went straight there: only the two drafts were sent to the group.
    expect(drafts).toHaveLength(2);
    expect(sendsTo(ITS_NEW_SUPERGROUP)).toHaveLength(1);
  });

  it("refuses a wrong or missing secret token with 401 and runs nothing", async () => {
    const before = runner.calls.length;
    const wrong = await post(update("-100400", { text: "forged" }), "not-the-secret");
    const missing = await post(update("-100400", { text: "forged" }), null);
    for (const res of [wrong, missing]) {
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe("unauthorized");
    }
    // Nothing was recorded, so nothing can run.
    expect(await host.query("SELECT 1 FROM event_log WHERE conversation_id = '-100400'")).toEqual([]);
    expect(runner.calls.length).toBe(before);
  });

  it("answers an unknown bot with 404", async () => {
    const res = await fetch(webhookUrl.replace(botId, "bot_nope"), { method: "POST", headers: { "x-telegram-bot-api-secret-token": SECRET_TOKEN }, body: "{}" });
    expect(res.status).toBe(404);
  });

  it("never runs a redelivered update twice, however late", async () => {
    const u = update("-100500", { text: "only once" });
    await post(u);
    await waitFor(() => sendsTo("-100500").length > 0);
    expect((await post(u)).status).toBe(200);
    expect((await post(u)).status).toBe(200);
    // A barrier instead of a sleep: the chat's runs go one after another, so once a later message is answered, a second run of the first would have been too.
    await post(update("-100500", { text: "marker" }));
    await waitFor(() => sendsTo("-100500").length > 1);
    expect(contextFor("only once")).toHaveLength(1);
    expect(sendsTo("-100500")).toHaveLength(2);
    const rows = await host.query("SELECT event_id FROM event_log WHERE event_id = ?", [`telegram:${botId}:${u.update_id}`]);
    expect(rows).toHaveLength(1);
  });

  it("streams a reply into one message, edited at most once a second, ending exactly on the final text", async () => {
    await post(update("-100600", { text: "stream one two three four five six" }));
    const final = "one two three four five six";
    await waitFor(() => editsOf("-100600").some((c) => c.body.text === final), 15_000, "the final edit");
    const [send] = sendsTo("-100600");
    expect(sendsTo("-100600")).toHaveLength(1);
    expect(final.startsWith(send.body.text)).toBe(true);
    const edits = editsOf("-100600");
    expect(edits.every((e) => e.body.message_id === messageIdOf(send))).toBe(true);
    expect(edits.at(-1)!.body.text).toBe(final);
    // The send and every edit of the message are at least the interval apart (small clock tolerance).
    for (const gap of gapsBetween([send.at, ...edits.map((e) => e.at)])) expect(gap).toBeGreaterThanOrEqual(950);
    // Six deltas over ~1.5 s: far fewer edits than deltas.
    expect(edits.length).toBeLessThanOrEqual(3);
  });

  it("an edit whose answer broke off is tried again, never taken for a refusal that would post the text anew", async () => {
    cutEditChats.add("-100650");
    await post(update("-100650", { text: "stream one two three four five six" }));
    await waitFor(() => editsOf("-100650").some((c) => c.body.text === "one two three four five six"), 15_000, "the final edit");
    const runId = contextFor("stream one two three four five six").find((c) => c.conversation.conversation_id === "-100650")!.run_id;
    await host.waitForRun(runId);
    const rows = await waitFor(async () => {
      const r = await host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type LIKE 'delivery.%' ORDER BY seq", [runId]);
      return r.filter((row) => row.event_type === "delivery.succeeded").length >= 2 && r;
    });
    expect(rows.map((r) => ({ type: r.event_type, ...JSON.parse(r.data_json) })).find((r) => r.type === "delivery.failed")).toMatchObject({ operation: "edit", code: "network_error", will_retry: true });
    expect(sendsTo("-100650")).toHaveLength(1);
  });

  it("splits a long reply at 4096 characters, every part in the chat, only the first quoting", async () => {
    await post(update("-100700", { text: "long 9000" }));
    const sends = await waitFor(() => sendsTo("-100700").length >= 3 && sendsTo("-100700"));
    expect(sends.every((s) => s.body.text.length <= 4096)).toBe(true);
    expect(sends.map((s) => s.body.text).join("")).toHaveLength(9000);
    expect(sends[0].body.reply_parameters).toBeDefined();
    expect(sends.slice(1).every((s) => s.body.reply_parameters === undefined)).toBe(true);
  });

  it("cuts a runaway reply at DELIVERY_MAX_PARTS (20) messages, the last saying so", async () => {
    await post(update("-100710", { text: "long 200000" }));
    const runId = await waitFor(() => contextFor("long 200000").find((c) => c.conversation.conversation_id === "-100710")?.run_id);
    expect((await host.waitForRun(runId)).message?.content).toHaveLength(200_000);
    const sends = await waitFor(() => sendsTo("-100710").length >= 20 && sendsTo("-100710"));
    await new Promise((r) => setTimeout(r, 500));
    expect(sendsTo("-100710")).toHaveLength(20);
    expect(sends.at(-1)!.body.text).toBe("(The answer goes on, but is too long for this chat: the rest was cut.)");
    expect(sends.slice(0, -1).every((s) => s.body.text.length > 2048 && s.body.text.length <= 4096)).toBe(true);
  });

  it("retries a 429 after the retry_after Telegram asks for, and records both attempts", async () => {
    throttledChats.set("-100800", 1);
    await post(update("-100800", { text: "rate limited" }));
    const sends = await waitFor(() => sendsTo("-100800").length >= 2 && sendsTo("-100800"));
    expect(sends[1].at - sends[0].at).toBeGreaterThanOrEqual(950);
    const runId = contextFor("rate limited")[0].run_id;
    const rows = await waitFor(async () => {
      const r = await host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type LIKE 'delivery.%' ORDER BY seq", [runId]);
      return r.length >= 4 && r;
    });
    expect(rows.map((r) => r.event_type)).toEqual(["delivery.attempted", "delivery.failed", "delivery.attempted", "delivery.succeeded"]);
    expect(JSON.parse(rows[1].data_json)).toMatchObject({ status: 429, code: "rate_limited", retry_after_ms: 1000, will_retry: true, attempt: 1 });
    expect(JSON.parse(rows[3].data_json)).toMatchObject({ attempt: 2 });
    expect((await host.waitForRun(runId)).status).toBe("completed");
  });

  it("never sends again a message whose connection dropped before Telegram answered: it may have been posted", async () => {
    droppingChats.add("-100950");
    await post(update("-100950", { text: "posted once" }));
    const runId = (await waitFor(() => contextFor("posted once")[0]))!.run_id;
    const rows = await waitFor(async () => {
      const r = await host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type LIKE 'delivery.%' ORDER BY seq", [runId]);
      return r.some((row) => row.event_type === "delivery.failed") && r;
    });
    expect(rows.map((r) => r.event_type)).toEqual(["delivery.attempted", "delivery.failed"]);
    expect(JSON.parse(rows[1].data_json)).toMatchObject({ operation: "send", code: "network_error", will_retry: false });
    expect(sendsTo("-100950").map((c) => c.body.text)).toEqual(["echo: posted once"]);
  });

  it("a reply waiting out a rate limit holds neither its run nor the next run, and the next reply comes after it", async () => {
    throttledChats.set("-101200", 2);
    await post(update("-101200", { text: "first" }));
    const [refused] = await waitFor(() => sendsTo("-101200").length > 0 && sendsTo("-101200"));
    expect(refused.reply?.status).toBe(429);
    // The run's status was final before its reply was even tried.
    const first = contextFor("first")[0].run_id;
    expect((await host.admin("GET", `/v1/runs/${first}`)).body.status).toBe("completed");
    await post(update("-101200", { text: "second" }));
    const second = (await waitFor(() => contextFor("second")[0], 15_000, "the second run"))!.run_id;
    expect((await host.waitForRun(second)).status).toBe("completed");
    const [{ ended_at: secondEndedAt }] = await host.query<{ ended_at: number }>("SELECT ended_at FROM run WHERE run_id = ?", [second]);
    const sends = await waitFor(() => sendsTo("-101200").length >= 3 && sendsTo("-101200"), 15_000, "both replies");
    // The second run ended while the first reply still waited for its retry; its own reply waited its turn behind it.
    expect(secondEndedAt).toBeLessThan(sends[1].at);
    expect(sends.map((c) => c.body.text)).toEqual(["echo: first", "echo: first", "echo: second"]);
    expect(sends[1].at - sends[0].at).toBeGreaterThanOrEqual(1950);
    expect(sends[2].at).toBeGreaterThanOrEqual(sends[1].at);
  });

  it("downloads a photo into R2 as an input artifact the runner gets by reference", async () => {
    await post(update("-100900", { caption: "look", photo: [{ file_id: "small", width: 90, height: 90 }, { file_id: "big", width: 800, height: 800 }] }));
    await waitFor(() => sendsTo("-100900").length > 0);
    expect(fake.callsTo(/\/getFile$/).map((c) => c.body.file_id)).toContain("big");
    const [ctx] = contextFor("look");
    expect(ctx.input.attachments).toHaveLength(1);
    const [ref] = ctx.input.attachments;
    expect(ref).toMatchObject({ artifact_type: "image", mime_type: "image/jpeg", size_bytes: PHOTO.length });
    expect(ctx.input.contents).toEqual([{ type: "text", text: "look" }, { type: "image", artifact_id: ref.artifact_id }]);
    expect(await host.r2Object(`artifacts/${ref.artifact_id}`)).toEqual(PHOTO);
  });

  it("records joins as group.member_joined and other updates as unhandled, acknowledging both", async () => {
    const joined = update("-101000", { new_chat_members: [{ id: 7, is_bot: false, first_name: "Bob" }, { id: 8, is_bot: false, first_name: "Cy" }] });
    expect((await post(joined)).status).toBe(200);
    const rows = await host.query<{ event_type: string; actor_id: string; source_event_type: string }>("SELECT event_type, actor_id, source_event_type FROM event_log WHERE conversation_id = '-101000' ORDER BY seq");
    expect(rows).toEqual([
      { event_type: "group.member_joined", actor_id: "7", source_event_type: "new_chat_members" },
      { event_type: "group.member_joined", actor_id: "8", source_event_type: "new_chat_members" },
    ]);
    // A press on a message sent in inline mode names no chat to answer in: recorded, and closed by the webhook's answer.
    const callback = { update_id: ++updateId, callback_query: { id: "cb1", from: { id: 42, first_name: "Ada" }, inline_message_id: "AAE1", chat_instance: "-5", data: "x" } };
    expect(await post(callback)).toEqual({ status: 200, body: { method: "answerCallbackQuery", callback_query_id: "cb1", text: "This interaction is not supported." } });
    const [row] = await host.query<{ event_type: string; source_event_type: string; raw_ref: string }>("SELECT event_type, source_event_type, raw_ref FROM event_log WHERE event_id = ?", [`telegram:${botId}:${callback.update_id}`]);
    expect(row).toMatchObject({ event_type: "platform.unhandled", source_event_type: "callback_query" });
    expect(row.raw_ref).toMatch(/^raw\/telegram\//);
    // No agent took the joins: the bot's view says so, and why, without knowing the chat.
    const { last_unbound_event: unbound } = (await host.admin("GET", `/v1/admin/bots/${botId}`)).body;
    expect(unbound).toEqual({
      at: expect.any(String),
      event_id: expect.stringMatching(new RegExp(`^telegram:${botId}:${joined.update_id}`)),
      event_type: "group.member_joined",
      conversation_id: "-101000",
      thread_id: null,
      reason: `agent tg-agent (scope {"type":"bot","id":"${botId}"}) takes message.received, not group.member_joined`,
    });
    // Verified but unreadable (no update_id): still recorded and acknowledged, so Telegram does not retry it forever.
    expect(await post({ something: "else" })).toEqual({ status: 200, body: { ok: true } });
    const odd = await host.query("SELECT 1 FROM event_log WHERE event_type = 'platform.unhandled' AND source_event_type = 'unknown' AND bot_id = ?", [botId]);
    expect(odd).toHaveLength(1);
  });

  it("runs a press on an inline keyboard button as a message: its callback_data the input, the answer quoting the message it is on, in its topic; the webhook's answer closes the press", async () => {
    const keyboard = { inline_keyboard: [[{ text: "Yes, ship it", callback_data: "deploy:yes" }, { text: "No", callback_data: "deploy:no" }]] };
    const message = { message_id: 4321, date: 1_700_000_000, chat: { id: -101900, type: "supergroup", title: "Ops" }, message_thread_id: 88, is_topic_message: true, from: { id: 123456, is_bot: true, first_name: "Test", username: OUR_USERNAME }, text: "Deploy?", reply_markup: keyboard };
    const press = { update_id: ++updateId, callback_query: { id: "4382bfdwdsb323b2d9", from: { id: 42, is_bot: false, first_name: "Ada", username: "ada" }, message, chat_instance: "-8", data: "deploy:yes" } };
    // Telegram runs the method the answer names: the button's progress bar ends, with no notice as an answer is coming.
    expect(await post(press)).toEqual({ status: 200, body: { method: "answerCallbackQuery", callback_query_id: "4382bfdwdsb323b2d9" } });
    const [send] = await waitFor(() => sendsTo("-101900").length > 0 && sendsTo("-101900"), 10_000, "the press's answer");
    expect(send.body).toMatchObject({ text: "echo: deploy:yes", message_thread_id: 88, reply_parameters: { message_id: 4321 } });
    const [ctx] = contextFor("deploy:yes");
    expect(ctx.conversation).toMatchObject({ conversation_id: "-101900", thread_id: "88" });
    expect(ctx.actor).toMatchObject({ actor_type: "user", actor_id: "42", actor_name: "Ada" });
    expect(ctx.event).toMatchObject({ event_type: "message.received", source_event_type: "callback_query" });
    expect(ctx.event.data).toMatchObject({ callback_message_id: 4321, component: { custom_id: "deploy:yes", component_type: "callback_button", label: "Yes, ship it" } });
    // The pressed message is the bot's, not one the user sent: never recorded as theirs (an edit of it, the chat's order).
    expect(ctx.event.data.message_id).toBeUndefined();
    // Sent again, it runs nothing more, and the press is closed all the same.
    expect(await post(press)).toEqual({ status: 200, body: { method: "answerCallbackQuery", callback_query_id: "4382bfdwdsb323b2d9" } });
    await new Promise((r) => setTimeout(r, 500));
    expect(contextFor("deploy:yes")).toHaveLength(1);
  });

  it("answers a button pressed twice in quick succession once: the second press is closed with a notice and recorded rejected (repeated_press), naming the first's run; another button, or another person, still runs", async () => {
    const keyboard = { inline_keyboard: [[{ text: "Approve", callback_data: "approve" }, { text: "Reject", callback_data: "reject" }]] };
    const message = { message_id: 4400, date: Math.floor(Date.now() / 1000), chat: { id: -101910, type: "supergroup", title: "Ops" }, from: { id: 123456, is_bot: true, first_name: "Test", username: OUR_USERNAME }, text: "Approve?", reply_markup: keyboard };
    const ada = { id: 42, is_bot: false, first_name: "Ada" };
    const pressOf = (id: string, data: string, from = ada) => ({ update_id: ++updateId, callback_query: { id, from, message, chat_instance: "-8", data } });
    const [first, second] = [pressOf("cb-tap-1", "approve"), pressOf("cb-tap-2", "approve")];
    const pressedAt = Date.now();
    // Both taps race in, as Telegram delivers them over separate connections.
    const [firstAck, secondAck] = await Promise.all([post(first), post(second)]);
    const acks = [firstAck.body, secondAck.body];
    const repeat = "Already answering your earlier press of this button.";
    expect(acks.filter((a) => a.text === repeat)).toHaveLength(1);
    expect(acks.filter((a) => a.text === undefined)).toHaveLength(1);
    await waitFor(() => sendsTo("-101910").length > 0, 10_000, "the press's answer");
    const rows = await host.query<{ event_id: string; run_id: string | null; disposition: string; metadata_json: string }>("SELECT event_id, run_id, disposition, metadata_json FROM event_log WHERE event_id IN (?, ?) ORDER BY seq", [`telegram:${botId}:${first.update_id}`, `telegram:${botId}:${second.update_id}`]);
    const answeredRow = rows.find((r) => r.run_id !== null)!;
    const repeatedRow = rows.find((r) => r.run_id === null)!;
    expect(JSON.parse(repeatedRow.metadata_json).rejection).toEqual({ reason: "repeated_press", first_event_id: answeredRow.event_id, first_run_id: answeredRow.run_id });
    // The other button on the same message, and another person's press of the same one, are questions of their own.
    expect((await post(pressOf("cb-tap-3", "reject"))).body).toEqual({ method: "answerCallbackQuery", callback_query_id: "cb-tap-3" });
    expect((await post(pressOf("cb-tap-4", "approve", { id: 43, is_bot: false, first_name: "Bob" }))).body).toEqual({ method: "answerCallbackQuery", callback_query_id: "cb-tap-4" });
    await waitFor(() => sendsTo("-101910").length === 3, 10_000, "the other presses' answers");
    await new Promise((r) => setTimeout(r, 300));
    expect(sendsTo("-101910").map((s) => s.body.text).sort()).toEqual(["echo: approve", "echo: approve", "echo: reject"]);
    expect(contextFor("approve").map((c) => c.actor.actor_id).sort()).toEqual(["42", "43"]);
    // Pressed again once its answer came (within the window still): asked anew, and answered.
    expect(Date.now() - pressedAt).toBeLessThan(PRESS_REPEAT_WINDOW_MS);
    expect((await post(pressOf("cb-tap-5", "approve"))).body).toEqual({ method: "answerCallbackQuery", callback_query_id: "cb-tap-5" });
    await waitFor(() => sendsTo("-101910").length === 4, 10_000, "the press's answer again");
    expect(contextFor("approve").map((c) => c.actor.actor_id).sort()).toEqual(["42", "42", "43"]);
  });

  it("runs a press on a message Telegram no longer gives (an InaccessibleMessage, date 0: no topic named) in the chat itself, its answer quoting nothing", async () => {
    // A button on an old message in a forum's topic: Telegram gives its chat and id only. A reply to it would go to
    // its topic, while the press, naming none, is recorded in the chat's General.
    const message = { message_id: 4322, date: 0, chat: { id: -101901, type: "supergroup", title: "Ops", is_forum: true } };
    const press = { update_id: ++updateId, callback_query: { id: "cb-inaccessible", from: { id: 42, is_bot: false, first_name: "Ada" }, message, chat_instance: "-8", data: "deploy:later" } };
    expect(await post(press)).toEqual({ status: 200, body: { method: "answerCallbackQuery", callback_query_id: "cb-inaccessible" } });
    const [send] = await waitFor(() => sendsTo("-101901").length > 0 && sendsTo("-101901"), 10_000, "the press's answer");
    expect(send.body.text).toBe("echo: deploy:later");
    expect(send.body.reply_parameters).toBeUndefined();
    expect(send.body.message_thread_id).toBeUndefined();
    const [ctx] = contextFor("deploy:later");
    expect(ctx.conversation).toMatchObject({ conversation_id: "-101901", thread_id: null });
    expect(ctx.event.data).toMatchObject({ callback_message_id: 4322, component: { custom_id: "deploy:later", label: null } });
    expect(ctx.delivery.reply_target).toMatchObject({ chat_id: "-101901", message_thread_id: null, reply_to_message_id: null });
  });

  it("shows on the bot's view why a message went unanswered with no agent: the agent disabled, or none scoped to the bot", async () => {
    const other = await addTelegramBot(host, { apiBaseUrl: fake.url, botToken: BOT_TOKEN, secretToken: SECRET_TOKEN, name: "tg-off" }, { runner, agentId: "tg-off" });
    const agent = (await host.admin("GET", "/v1/admin/agents/tg-off")).body;
    expect((await host.admin("PUT", "/v1/admin/agents/tg-off", { ...agent, enabled: false })).status).toBe(200);
    const say = async (text: string) => {
      const u = update("-101050", { text });
      const res = await fetch(other.webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": SECRET_TOKEN }, body: JSON.stringify(u) });
      expect(res.status).toBe(200);
      return (await host.admin("GET", `/v1/admin/bots/${other.botId}`)).body.last_unbound_event;
    };
    expect(await say("anyone there?")).toMatchObject({ event_type: "message.received", conversation_id: "-101050", reason: `agent tg-off (scope {"type":"bot","id":"${other.botId}"}) is disabled` });
    expect((await host.admin("DELETE", "/v1/admin/agents/tg-off")).status).toBe(200);
    expect(await say("still nobody?")).toMatchObject({ reason: "no agent's scope covers it (its bot, its workspace, its conversation, or global)" });
    // A press no agent takes is closed saying so, rather than left spinning.
    const press = { update_id: ++updateId, callback_query: { id: "cb-unbound", from: { id: 42, first_name: "Ada" }, chat_instance: "-9", data: "go", message: { message_id: 5, date: 1_700_000_000, chat: { id: -101050, type: "supergroup" } } } };
    const pressed = await fetch(other.webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": SECRET_TOKEN }, body: JSON.stringify(press) });
    expect(await pressed.json()).toEqual({ method: "answerCallbackQuery", callback_query_id: "cb-unbound", text: "No agent answers here." });
    expect(contextFor("anyone there?")).toEqual([]);
  });

  it("shows on the bot's view the last reply the platform refused for good, in its words, with the run and chat", async () => {
    await post(update(BLOCKED_CHAT, { text: "are you there?" }));
    const runId = await waitFor(() => contextFor("are you there?")[0]?.run_id);
    const failure = await waitFor(async () => {
      const view = (await host.admin("GET", `/v1/admin/bots/${botId}`)).body;
      return view.last_delivery_failure?.run_id === runId && view.last_delivery_failure;
    });
    expect(failure).toMatchObject({
      at: expect.any(String),
      run_id: runId,
      conversation_id: BLOCKED_CHAT,
      thread_id: null,
      operation: "send",
      status: 403,
      code: "telegram_403",
      error: "Forbidden: bot was blocked by the user",
    });
  });

  it("stops a reply at the first refusal of a group that removed the bot: its other parts and its files are not tried, and it is recorded once", async () => {
    // Three parts, then a text and a file.
    await post(update(KICKED_CHAT, { text: "long 9001" }));
    await post(update(KICKED_CHAT, { text: "attach kicked.pdf" }));
    const runIds = await waitFor(() => {
      const ids = ["long 9001", "attach kicked.pdf"].map((text) => contextFor(text)[0]?.run_id);
      return ids.every(Boolean) && ids;
    });
    // Settled: nothing more is tried after each reply's one refusal.
    const failures = await settledRefusals(host, runIds);
    const calls = fake.calls.filter((c) => String(c.body?.chat_id ?? /name="chat_id"\r\n\r\n([^\r]*)/.exec(c.raw)?.[1]) === KICKED_CHAT);
    expect(calls.map((c) => [c.path.split("/").pop(), c.body?.text])).toEqual([
      ["sendMessage", expect.stringMatching(/^line 1 /)],
      ["sendMessage", "here is kicked.pdf"],
    ]);
    for (const given of failures) expect(given).toEqual([expect.objectContaining({ operation: "send", part: 1, status: 403, code: "telegram_403", error: "Forbidden: bot was kicked from the supergroup chat", will_retry: false })]);
  });

  it("delivers a welcome for a join to the chat and topic, quoting nothing", async () => {
    await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "tg-welcome", scope: { type: "bot", id: botId }, eventTypes: ["group.member_joined"] });
    const joined = update("-101400", { new_chat_members: [{ id: 9, is_bot: false, first_name: "Dee" }], message_thread_id: 77, is_topic_message: true });
    expect((await post(joined)).status).toBe(200);
    const [send] = await waitFor(() => sendsTo("-101400").length > 0 && sendsTo("-101400"), 10_000, "the welcome");
    expect(send.body).toMatchObject({ chat_id: "-101400", message_thread_id: 77 });
    expect(send.body.reply_parameters).toBeUndefined();
  });

  it("records another bot's message without answering it (two agents would answer each other forever), but answers an anonymous admin", async () => {
    const fromBot = update("-101300", { from: { id: 999, is_bot: true, first_name: "OtherAgent" }, text: "a bot speaking", reply_to_message: { message_id: 5 } });
    expect((await post(fromBot)).status).toBe(200);
    const anonymousAdmin = update("-101300", { from: { id: 1087968824, is_bot: true, first_name: "Group", username: "GroupAnonymousBot" }, sender_chat: { id: -101300, type: "supergroup" }, text: "an admin speaking" });
    expect((await post(anonymousAdmin)).status).toBe(200);
    await waitFor(() => sendsTo("-101300").some((c) => c.body.text === "echo: an admin speaking"), 10_000, "the admin's answer");
    const [row] = await host.query<{ event_type: string; source_event_type: string }>("SELECT event_type, source_event_type FROM event_log WHERE event_id = ?", [`telegram:${botId}:${fromBot.update_id}`]);
    expect(row).toEqual({ event_type: "platform.unhandled", source_event_type: "message.from_bot" });
    expect(contextFor("a bot speaking")).toEqual([]);
  });

  it("records a linked channel's post auto-forwarded into its discussion group without answering it, but answers a comment on it", async () => {
    const forward = update("-101600", { from: { id: 777000, is_bot: false, first_name: "Telegram" }, sender_chat: { id: -1001016000001, type: "channel", title: "News" }, is_automatic_forward: true, text: "a channel post" });
    expect((await post(forward)).status).toBe(200);
    const [row] = await host.query<{ event_type: string; source_event_type: string; conversation_id: string }>("SELECT event_type, source_event_type, conversation_id FROM event_log WHERE event_id = ?", [`telegram:${botId}:${forward.update_id}`]);
    expect(row).toEqual({ event_type: "platform.unhandled", source_event_type: "message.automatic_forward", conversation_id: "-101600" });
    await post(update("-101600", { text: "a comment", reply_to_message: { message_id: forward.message.message_id } }));
    await waitFor(() => sendsTo("-101600").some((c) => c.body.text === "echo: a comment"), 10_000, "the comment's answer");
    expect(contextFor("a channel post")).toEqual([]);
    expect(sendsTo("-101600")).toHaveLength(1);
  });

  it("answers a group command addressed to it (any case, its name left out) or to no bot, and records one addressed to another bot without running it", async () => {
    const command = (text: string) => update("-101700", { text, entities: [{ type: "bot_command", offset: 0, length: text.split(" ")[0].length }] });
    const forOther = command("/help@OtherBot");
    expect((await post(forOther)).status).toBe(200);
    const [row] = await host.query<{ event_type: string; source_event_type: string; conversation_id: string }>("SELECT event_type, source_event_type, conversation_id FROM event_log WHERE event_id = ?", [`telegram:${botId}:${forOther.update_id}`]);
    expect(row).toEqual({ event_type: "platform.unhandled", source_event_type: "message.command_for_other_bot", conversation_id: "-101700" });
    const ours = command("/help@ourtestbot please");
    await post(ours);
    await post(command("/help"));
    // In a private chat only this bot is there to ask: a command naming another bot is answered as sent, one naming it
    // (as typed by hand) reaches the runner as a bare one reads.
    const inPrivate = (text: string) => ({ ...command(text), message: { ...command(text).message, chat: { id: 101700, type: "private" } } });
    await post(inPrivate("/start@OtherBot"));
    await waitFor(() => sendsTo("101700").length >= 1, 15_000, "the private answer");
    await post(inPrivate("/start@OurTestBot now"));
    await waitFor(() => sendsTo("-101700").length >= 2 && sendsTo("101700").length >= 2, 15_000, "the answers");
    expect(sendsTo("101700").map((c) => c.body.text)).toEqual(["echo: /start@OtherBot", "echo: /start now"]);
    // The runner gets the command as a bare one reads; the raw update keeps what was sent.
    expect(sendsTo("-101700").map((c) => c.body.text)).toEqual(["echo: /help please", "echo: /help"]);
    const [{ raw_ref: rawRef }] = await host.query<{ raw_ref: string }>("SELECT raw_ref FROM event_log WHERE event_id = ?", [`telegram:${botId}:${ours.update_id}`]);
    expect(JSON.parse(new TextDecoder().decode((await host.r2Object(rawRef))!)).message.text).toBe("/help@ourtestbot please");
    // A link after the command keeps its target where it is, its offset counted in the text as sent.
    const text = "/ask@OurTestBot see the docs";
    await post(update("-101700", { text, entities: [{ type: "bot_command", offset: 0, length: 15 }, { type: "text_link", offset: 24, length: 4, url: "https://example.com/docs" }] }));
    await waitFor(() => sendsTo("-101700").length >= 3, 15_000, "the linked command's answer");
    expect(sendsTo("-101700")[2].body.text).toBe("echo: /ask see the docs (https://example.com/docs)");
    expect(contextFor("/help@OtherBot").filter((c) => c.conversation.conversation_id === "-101700")).toEqual([]);
    // The username was asked once, when a command first named a bot, and kept.
    expect(fake.callsTo(/\/getMe$/).filter((c) => c.path.includes(BOT_TOKEN))).toHaveLength(1);
  });

  it("leaves its own leading @mention out of the text, as its name in a command: others', and one later in the message, stay; raw_text keeps what was sent", async () => {
    const mentioning = (text: string, length: number) => update("-101750", { text, entities: [{ type: "mention", offset: 0, length }] });
    const addressed = mentioning("@ourtestbot, what's new?", 11);
    for (const u of [addressed, mentioning("@OtherBot what's new?", 9), mentioning("@OurTestBot", 11), update("-101750", { text: "thanks @OurTestBot", entities: [{ type: "mention", offset: 7, length: 11 }] })]) expect((await post(u)).status).toBe(200);
    await waitFor(() => sendsTo("-101750").length >= 4, 15_000, "the answers");
    expect(sendsTo("-101750").map((c) => c.body.text)).toEqual(["echo: what's new?", "echo: @OtherBot what's new?", "echo: @OurTestBot", "echo: thanks @OurTestBot"]);
    const [ctx] = contextFor("what's new?");
    expect(ctx.event.data).toMatchObject({ message_id: addressed.message.message_id, raw_text: "@ourtestbot, what's new?" });
    // A link after the mention keeps its target where it is, its offset counted in the text as sent.
    const text = "@OurTestBot read the docs";
    await post(update("-101750", { text, entities: [{ type: "mention", offset: 0, length: 11 }, { type: "text_link", offset: 21, length: 4, url: "https://example.com/docs" }] }));
    await waitFor(() => sendsTo("-101750").some((c) => c.body.text === "echo: read the docs (https://example.com/docs)"), 15_000, "the linked message's answer");
  });

  it("gives the runner the message a reply answers, which the bot in a group never received: its sender, words and the part quoted; a topic's root is no reply", async () => {
    const bobs = { message_id: 31, date: 1_700_000_000, chat: { id: -101770, type: "supergroup" }, from: { id: 7, is_bot: false, first_name: "Bob" }, text: "Bonjour tout le monde", entities: [{ type: "text_link", offset: 0, length: 7, url: "https://fr.example" }] };
    const asking = update("-101770", { text: "@OurTestBot translate this", entities: [{ type: "mention", offset: 0, length: 11 }], reply_to_message: bobs, quote: { text: "Bonjour", position: 0 } });
    expect((await post(asking)).status).toBe(200);
    await waitFor(() => sendsTo("-101770").length > 0, 15_000, "the answer");
    const [ctx] = contextFor("translate this");
    expect(ctx.event.data).toMatchObject({
      reply_to_message_id: 31,
      reply_to: { message_id: 31, actor: { actor_type: "user", actor_id: "7", actor_name: "Bob" }, text: "Bonjour (https://fr.example) tout le monde", quote: "Bonjour" },
    });
    // In a forum topic, every message Telegram sends "replies" to the topic's opening: that says nothing.
    const opening = { message_id: 88, date: 1_700_000_000, chat: { id: -101771, type: "supergroup" }, message_thread_id: 88, is_topic_message: true, forum_topic_created: { name: "Ops", icon_color: 7322096 } };
    await post(update("-101771", { text: "in the topic", message_thread_id: 88, is_topic_message: true, reply_to_message: opening }));
    await post(update("-101771", { text: "no reply at all" }));
    // A reply the user chose in the topic is one.
    const carols = { message_id: 90, date: 1_700_000_000, chat: opening.chat, message_thread_id: 88, is_topic_message: true, from: { id: 8, is_bot: false, first_name: "Carol" }, text: "the build is red" };
    await post(update("-101771", { text: "since when?", message_thread_id: 88, is_topic_message: true, reply_to_message: carols }));
    await waitFor(() => sendsTo("-101771").length >= 3, 15_000, "the answers");
    expect(contextFor("in the topic")[0].event.data).toMatchObject({ reply_to_message_id: null, reply_to: null });
    expect(contextFor("no reply at all")[0].event.data).toMatchObject({ reply_to_message_id: null, reply_to: null });
    expect(contextFor("since when?")[0].event.data).toMatchObject({ reply_to_message_id: 90, reply_to: { message_id: 90, text: "the build is red" } });
  });

  it("gives the runner the files of the message a reply answers, after its own, named in reply_to.attachments and marked as the replied message's", async () => {
    // Bob posts a PDF; Ada replies to it with a photo of her own: "@OurTestBot compare these".
    const bobs = { message_id: 41, date: 1_700_000_000, chat: { id: -101780, type: "supergroup" }, from: { id: 7, is_bot: false, first_name: "Bob" }, caption: "Q3 report", document: { file_id: "bobs_pdf", file_name: "q3.pdf", mime_type: "application/pdf" } };
    const asking = update("-101780", { caption: "@OurTestBot compare these", caption_entities: [{ type: "mention", offset: 0, length: 11 }], photo: [{ file_id: "adas_photo", width: 800, height: 800 }], reply_to_message: bobs });
    expect((await post(asking)).status).toBe(200);
    await waitFor(() => sendsTo("-101780").length > 0, 15_000, "the answer");
    const [ctx] = contextFor("compare these");
    expect(fake.callsTo(/\/getFile$/).map((c) => c.body.file_id)).toEqual(expect.arrayContaining(["adas_photo", "bobs_pdf"]));
    const [own, replied] = ctx.input.attachments;
    expect(ctx.input.attachments).toHaveLength(2);
    expect(own).toMatchObject({ artifact_type: "image", mime_type: "image/jpeg" });
    expect(replied).toMatchObject({ artifact_type: "file", mime_type: "application/pdf", name: "q3.pdf", size_bytes: PHOTO.length });
    expect(ctx.event.data.reply_to).toEqual({ message_id: 41, actor: { actor_type: "user", actor_id: "7", actor_name: "Bob" }, text: "Q3 report", quote: null, attachments: [replied], unavailable: null });
    // A runner reading only contents sees both files too.
    expect(ctx.input.contents).toEqual([{ type: "text", text: "compare these" }, { type: "image", artifact_id: own.artifact_id }, { type: "file", artifact_id: replied.artifact_id, name: "q3.pdf" }]);
    const rows = await host.query<{ artifact_id: string; metadata_json: string }>("SELECT artifact_id, metadata_json FROM artifact WHERE artifact_id IN (?, ?)", [own.artifact_id, replied.artifact_id]);
    const metadata = Object.fromEntries(rows.map((r) => [r.artifact_id, JSON.parse(r.metadata_json)]));
    expect(metadata[replied.artifact_id].reply_to_message_id).toBe("41");
    expect(metadata[own.artifact_id].reply_to_message_id).toBeUndefined();
    // A reply with no words of its own to a voice note still runs on the note.
    const voice = { message_id: 42, date: 1_700_000_000, chat: { id: -101781, type: "supergroup" }, from: { id: 7, is_bot: false, first_name: "Bob" }, voice: { file_id: "bobs_voice", mime_type: "audio/ogg" } };
    await post(update("-101781", { text: "what did he say?", reply_to_message: voice }));
    await waitFor(() => sendsTo("-101781").length > 0, 15_000, "the answer");
    const [heard] = contextFor("what did he say?");
    expect(heard.input.attachments).toEqual([expect.objectContaining({ artifact_type: "audio", mime_type: "audio/ogg" })]);
    expect(heard.event.data.reply_to).toMatchObject({ message_id: 42, text: null, attachments: heard.input.attachments });
  });

  it("gives the runner a reply to a message of another chat (external_reply): its sender, the part quoted and its files, never a message of this chat that has its id", async () => {
    // Ada's own photo in her private chat with the bot, message 77 there.
    const chat = "101785";
    const inPrivate = (message: Record<string, unknown>) => ({ ...update(chat, message), message: { ...update(chat, message).message, chat: { id: Number(chat), type: "private" } } });
    const hers = inPrivate({ message_id: 77, caption: "my cat", photo: [{ file_id: "adas_cat", width: 800, height: 800 }] });
    await post(hers);
    await waitFor(() => contextFor("my cat").length > 0, 15_000, "the photo's run");
    // Then "Reply in another chat": Bob's sheet, message 77 of a supergroup, quoted into the private chat.
    const external_reply = {
      origin: { type: "user", date: 1_700_000_000, sender_user: { id: 7, is_bot: false, first_name: "Bob" } },
      chat: { id: -1001017850, type: "supergroup", title: "Team" },
      message_id: 77,
      document: { file_id: "bobs_sheet", file_name: "q4.csv", mime_type: "text/csv" },
    };
    await post(inPrivate({ text: "what is the total?", external_reply, quote: { text: "Q4 totals", position: 0 } }));
    const [ctx] = await waitFor(() => contextFor("what is the total?").length > 0 && contextFor("what is the total?"), 15_000, "the reply's run");
    expect(fake.callsTo(/\/getFile$/).map((c) => c.body.file_id)).toContain("bobs_sheet");
    expect(ctx.input.attachments).toEqual([expect.objectContaining({ artifact_type: "file", name: "q4.csv" })]);
    // `chat` says whose message 77 it is; no reply_to_message_id names one of this chat.
    expect(ctx.event.data.reply_to).toEqual({ message_id: 77, actor: { actor_type: "user", actor_id: "7", actor_name: "Bob" }, text: null, quote: "Q4 totals", attachments: ctx.input.attachments, unavailable: null, chat: { chat_id: "-1001017850", chat_title: "Team" } });
    expect(ctx.event.data.reply_to_message_id).toBeNull();
    // A location sent in a chat whose ids Telegram does not give: read as received, no id.
    const place = { origin: { type: "hidden_user", date: 1_700_000_000, sender_user_name: "Carol" }, location: { latitude: 48.8584, longitude: 2.2945 } };
    await post(inPrivate({ text: "how far is it?", external_reply: place }));
    const [far] = await waitFor(() => contextFor("how far is it?").length > 0 && contextFor("how far is it?"), 15_000, "the location reply's run");
    expect(far.event.data.reply_to).toEqual({ message_id: null, actor: null, text: "📍 Location: 48.8584, 2.2945", quote: null, attachments: [], unavailable: null, chat: null });
    // A file Telegram will not serve, of a message whose id it does not give: left out, and said so as the replied message's.
    const bulky = { origin: { type: "hidden_user", date: 1_700_000_000, sender_user_name: "Carol" }, document: { file_id: "carols_trip_too_big", file_name: "trip.mp4", mime_type: "video/mp4" } };
    const asked = inPrivate({ text: "what is in it?", external_reply: bulky });
    await post(asked);
    const [inIt] = await waitFor(() => contextFor("what is in it?").length > 0 && contextFor("what is in it?"), 15_000, "the reply to the big file's run");
    expect([inIt.input.attachments, inIt.event.data.reply_to]).toEqual([[], { message_id: null, actor: null, text: null, quote: null, attachments: [], unavailable: null, chat: null }]);
    const [row] = await host.query<{ metadata_json: string }>("SELECT metadata_json FROM event_log WHERE event_id = ?", [`telegram:${botId}:${asked.update_id}`]);
    expect(JSON.parse(row.metadata_json).attachments_unavailable).toBe("trip.mp4 of the replied message (Telegram getFile failed: Bad Request: file is too big)");
  });

  it("gives a reply to a message the bot received that message's files as stored then (no getFile, the same artifact); one expired, or edited, since is fetched again", async () => {
    const chat = "-101790";
    const plan = update(chat, { caption: "our plan", photo: [{ file_id: "plan_photo", width: 800, height: 800 }] });
    await post(plan);
    const [first] = await waitFor(() => contextFor("our plan").length > 0 && contextFor("our plan"), 15_000, "the photo's run");
    const [stored] = first.input.attachments;
    const fetches = () => fake.callsTo(/\/getFile$/).filter((c) => c.body.file_id === "plan_photo").length;
    expect(fetches()).toBe(1);

    await post(update(chat, { text: "is it doable?", reply_to_message: plan.message }));
    const [ctx] = await waitFor(() => contextFor("is it doable?").length > 0 && contextFor("is it doable?"), 15_000, "the reply's run");
    expect(fetches()).toBe(1);
    expect(ctx.input.attachments).toEqual([stored]);
    expect(ctx.input.contents).toEqual([{ type: "text", text: "is it doable?" }, { type: "image", artifact_id: stored.artifact_id }]);
    expect(ctx.event.data.reply_to).toMatchObject({ message_id: plan.message.message_id, text: "our plan", quote: null, attachments: [stored], unavailable: null });

    // Expired since (its TTL, or a recall): no longer the conversation's to give, so fetched again as for a message never received.
    await host.query("UPDATE artifact SET expires_at = ? WHERE artifact_id = ?", [Date.now() - 1_000, stored.artifact_id]);
    await post(update(chat, { text: "and now?", reply_to_message: plan.message }));
    const [later] = await waitFor(() => contextFor("and now?").length > 0 && contextFor("and now?"), 15_000, "the later reply's run");
    expect(fetches()).toBe(2);
    const [again] = later.input.attachments;
    expect(later.input.attachments).toEqual([expect.objectContaining({ artifact_type: "image", size_bytes: PHOTO.length })]);
    expect(again.artifact_id).not.toBe(stored.artifact_id);
    expect(later.event.data.reply_to.attachments).toEqual([again]);

    // A photo replaced by an edit since it was stored (Telegram's reply then gives the new one, and the edit's date):
    // fetched, never the old one as stored.
    const sketch = update(chat, { caption: "the sketch", photo: [{ file_id: "sketch_v1", width: 800, height: 800 }] });
    await post(sketch);
    const [drawn] = await waitFor(() => contextFor("the sketch").length > 0 && contextFor("the sketch"), 15_000, "the sketch's run");
    const edited = { ...sketch.message, photo: [{ file_id: "sketch_v2", width: 800, height: 800 }], edit_date: sketch.message.date + 60 };
    await post({ update_id: ++updateId, edited_message: edited });
    await post(update(chat, { text: "and this version?", reply_to_message: edited }));
    const [v2] = await waitFor(() => contextFor("and this version?").length > 0 && contextFor("and this version?"), 15_000, "the reply to the edited photo's run");
    expect(fake.callsTo(/\/getFile$/).map((c) => c.body.file_id)).toContain("sketch_v2");
    expect(v2.input.attachments).toEqual([expect.objectContaining({ artifact_type: "image", size_bytes: PHOTO.length })]);
    expect(v2.input.attachments[0].artifact_id).not.toBe(drawn.input.attachments[0].artifact_id);
    expect(v2.event.data.reply_to.attachments).toEqual(v2.input.attachments);
  });

  it("gives a reply to the bot's own answer the answer as the host recorded it: all its words when split over several messages, its photo as the same artifact (no getFile)", async () => {
    const chat = "-101795";
    const ourselves = { id: 123456, is_bot: true, first_name: "Test", username: OUR_USERNAME };
    const recorded = (messageId: number) =>
      waitFor(async () => (await host.query("SELECT seq FROM event_log WHERE event_type = 'delivery.succeeded' AND json_extract(data_json, '$.message_id') = ?", [String(messageId)])).length > 0, 15_000, `the trail of ${messageId}`);
    // Telegram gives the replied message as the chat shows it: here the second part of the answer only.
    await post(update(chat, { text: "long 5000" }));
    const parts = await waitFor(() => sendsTo(chat).length >= 2 && sendsTo(chat), 15_000, "the answer's two parts");
    const second = (parts[1].reply!.json as any).result.message_id as number;
    await recorded(second);
    await post(update(chat, { text: "make it shorter", reply_to_message: { message_id: second, from: ourselves, date: 1, chat: { id: Number(chat), type: "supergroup" }, text: parts[1].body.text } }));
    const [ctx] = await waitFor(() => contextFor("make it shorter").length > 0 && contextFor("make it shorter"), 15_000, "the reply's run");
    expect(ctx.event.data.reply_to).toEqual({ message_id: second, actor: { actor_type: "bot", actor_id: "123456", actor_name: "Test" }, text: longText(5000), quote: null, attachments: [], unavailable: null });
    // "Reply in another chat": the bot's message of that number in another supergroup, never this chat's answer.
    const elsewhere = { origin: { type: "user", date: 1_700_000_000, sender_user: ourselves }, chat: { id: -1001017960, type: "supergroup", title: "Other" }, message_id: second };
    await post(update(chat, { text: "and that one?", external_reply: elsewhere, quote: { text: "their words", position: 0 } }));
    const [other] = await waitFor(() => contextFor("and that one?").length > 0 && contextFor("and that one?"), 15_000, "the external reply's run");
    expect(other.event.data.reply_to).toEqual({ message_id: second, actor: { actor_type: "bot", actor_id: "123456", actor_name: "Test" }, text: null, quote: "their words", attachments: [], unavailable: null, chat: { chat_id: "-1001017960", chat_title: "Other" } });

    await post(update(chat, { text: "attach chart.png" }));
    const upload = await waitFor(() => fake.callsTo(/\/sendPhoto$/).find((c) => c.raw.includes(`name="chat_id"\r\n\r\n${chat}\r`) && c.reply), 15_000, "the photo");
    const photo = (upload.reply!.json as any).result.message_id as number;
    const runId = contextFor("attach chart.png")[0].run_id;
    const [made] = await host.query<{ artifact_id: string }>("SELECT artifact_id FROM artifact WHERE run_id = ?", [runId]);
    await recorded(photo);
    const fetches = () => fake.callsTo(/\/getFile$/).filter((c) => c.body.file_id === "our_chart").length;
    await post(update(chat, { text: "brighter", reply_to_message: { message_id: photo, from: ourselves, date: 1, chat: { id: Number(chat), type: "supergroup" }, photo: [{ file_id: "our_chart", width: 8, height: 8 }] } }));
    const [brighter] = await waitFor(() => contextFor("brighter").length > 0 && contextFor("brighter"), 15_000, "the second reply's run");
    expect(fetches()).toBe(0);
    expect(brighter.input.attachments).toEqual([expect.objectContaining({ artifact_id: made.artifact_id, artifact_type: "image", name: "chart.png" })]);
    expect(brighter.event.data.reply_to).toMatchObject({ message_id: photo, text: null, attachments: brighter.input.attachments, unavailable: null });
  });

  it("leaves out each of its own mentions among those a message starts with, whoever is named first; nothing after them, the text is as sent", async () => {
    const ada = { type: "text_mention", offset: 0, length: 3, user: { id: 77, is_bot: false, first_name: "Ada" } };
    const sent = [
      update("-101760", { text: "@OurTestBot @OurTestBot named twice", entities: [{ type: "mention", offset: 0, length: 11 }, { type: "mention", offset: 12, length: 11 }] }),
      // Another's mention first (a username, or a person without one), then the bot's, a link after them.
      update("-101761", { text: "@bob, @OurTestBot: see the docs", entities: [{ type: "mention", offset: 0, length: 4 }, { type: "mention", offset: 6, length: 11 }, { type: "text_link", offset: 27, length: 4, url: "https://example.com/docs" }] }),
      update("-101762", { text: "Ada @OurTestBot named second", entities: [ada, { type: "mention", offset: 4, length: 11 }] }),
      update("-101763", { text: "@bob @OurTestBot", entities: [{ type: "mention", offset: 0, length: 4 }, { type: "mention", offset: 5, length: 11 }] }),
    ];
    for (const u of sent) expect((await post(u)).status).toBe(200);
    const words = ["named twice", "@bob, see the docs (https://example.com/docs)", "Ada named second", "@bob @OurTestBot"];
    for (const [i, chat] of ["-101760", "-101761", "-101762", "-101763"].entries()) {
      const [answer] = await waitFor(() => sendsTo(chat).length > 0 && sendsTo(chat), 15_000, `the answer in ${chat}`);
      expect(answer.body.text).toBe(`echo: ${words[i]}`);
    }
  });

  it("answers a command addressed to another bot when its own username cannot be read (getMe failed), rather than drop it", async () => {
    const other = await addTelegramBot(host, { apiBaseUrl: fake.url, botToken: NO_GETME_TOKEN, secretToken: "tg-secret-token-nogetme-0123" }, { runner, agentId: "tg-agent-nogetme" });
    const u = update("-101800", { text: "/help@OtherBot", entities: [{ type: "bot_command", offset: 0, length: 14 }] });
    const res = await fetch(other.webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": "tg-secret-token-nogetme-0123" }, body: JSON.stringify(u) });
    expect(res.status).toBe(200);
    await waitFor(() => sendsTo("-101800").some((c) => c.body.text === "echo: /help@OtherBot"), 15_000, "the answer");
    // The failure is kept a while: during an outage the next commands do not each wait for getMe again.
    for (const next of ["/start@OtherBot", "/stop@OtherBot"]) {
      const again = update("-101800", { text: next, entities: [{ type: "bot_command", offset: 0, length: next.length }] });
      const answer = await fetch(other.webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": "tg-secret-token-nogetme-0123" }, body: JSON.stringify(again) });
      expect([answer.status, await answer.text()]).toEqual([200, '{"ok":true}']);
    }
    await waitFor(() => sendsTo("-101800").length >= 3, 15_000, "the next answers");
    expect(fake.callsTo(/\/getMe$/).filter((c) => c.path.includes(NO_GETME_TOKEN))).toHaveLength(1);
    // Said on the log, the platform's words on the one line.
    await expect.poll(() => host.logs()).toContain(`telegram bot ${other.botId}: getMe failed (Bad Gateway\\n${FORGED_LINE})`);
    expect(host.logs().split("\n").filter((l) => l.startsWith(FORGED_LINE))).toEqual([]);
  });

  it("sets the webhook with the secret token through the admin API", async () => {
    const res = await host.admin("POST", `/v1/admin/bots/${botId}/webhook`);
    answered.push(JSON.stringify(res.body));
    expect(res).toEqual({ status: 200, body: { bot_id: botId, webhook_url: webhookUrl, registered: true } });
    const [call] = fake.callsTo(/\/setWebhook$/);
    expect(call.body).toEqual({ url: webhookUrl, secret_token: SECRET_TOKEN });
  });

  it("removes the webhook through the admin API (deleteWebhook), as before a DELETE of the bot; a refusal is a 502 without the token", async () => {
    const res = await host.admin("DELETE", `/v1/admin/bots/${botId}/webhook`);
    answered.push(JSON.stringify(res.body));
    expect(res).toEqual({ status: 200, body: { bot_id: botId, registered: false } });
    const [call] = fake.callsTo(/\/deleteWebhook$/);
    expect(call.path).toBe(`/bot${BOT_TOKEN}/deleteWebhook`);
    // The bot stays registered, and its webhook can be set again.
    expect((await host.admin("GET", `/v1/admin/bots/${botId}`)).status).toBe(200);
    expect((await host.admin("POST", `/v1/admin/bots/${botId}/webhook`)).status).toBe(200);
    // A bot whose token Telegram no longer takes: the platform's refusal, as a 502.
    const revoked = await host.admin("POST", "/v1/admin/bots", { platform: "telegram", api_base_url: fake.url, credentials: { bot_token: "999:REVOKED-telegram-bot-token", secret_token: SECRET_TOKEN } });
    const refused = await host.admin("DELETE", `/v1/admin/bots/${revoked.body.bot_id}/webhook`);
    answered.push(JSON.stringify(refused.body));
    expect([refused.status, refused.body.error.code, refused.body.error.message]).toEqual([502, "bad_gateway", "telegram refused to remove the webhook: Unauthorized"]);
    expect((await host.admin("DELETE", "/v1/admin/bots/no-such-bot/webhook")).status).toBe(404);
  });

  it("keeps the bot token and secret token out of every answer, record and log line", async () => {
    // A failure whose platform message echoes the token, and a refused webhook (logged), happen here too.
    await post(update(LEAKY_CHAT, { text: "leak?" }));
    await post(update("-101100", { text: "forged" }), "wrong");
    const runId = await waitFor(() => contextFor("leak?")[0]?.run_id);
    const failed = await waitFor(async () => (await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE run_id = ? AND event_type = 'delivery.failed'", [runId]))[0]);
    expect(JSON.parse(failed.data_json)).toMatchObject({ status: 400, will_retry: false, error: "Bad Request: chat not found (bot [redacted])" });
    // A delivery that fails for good leaves the run as it ended.
    expect((await host.waitForRun(runId)).status).toBe("completed");
    const got = await host.admin("GET", `/v1/admin/bots/${botId}`);
    const list = await host.admin("GET", "/v1/admin/bots");
    answered.push(JSON.stringify(got.body), JSON.stringify(list.body));
    expect(got.body.credential_fields).toEqual(["bot_token", "secret_token"]);

    // The bot's notes of that failure and that refusal quote no secret either.
    expect(got.body.last_delivery_failure).toMatchObject({ run_id: runId, error: "Bad Request: chat not found (bot [redacted])" });
    expect(got.body.last_webhook_refusal).toMatchObject({ reason: "webhook refused: bad or missing X-Telegram-Bot-Api-Secret-Token" });
    const records = await host.query<{ row: string }>("SELECT data_json || metadata_json || COALESCE(input_json, '') AS row FROM event_log");
    const raws = await Promise.all((await host.r2Keys("raw/")).map(async (k) => new TextDecoder().decode((await host.r2Object(k))!)));
    expect(host.logs()).toMatch(/webhook refused/);
    for (const secret of [BOT_TOKEN, SECRET_TOKEN]) {
      for (const text of [...answered, ...records.map((r) => r.row), ...raws, host.logs()]) expect(text).not.toContain(secret);
    }
  });
});

/** The message id the fake gave a send. */
const messageIdOf = (send: PlatformCall) => (send.reply?.json as any)?.result?.message_id;

describe("Telegram: files in answers", () => {
  /** The uploads to a chat, with their form fields parsed. */
  const uploadsTo = async (chat: string) => {
    const uploads = [];
    for (const call of fake.callsTo(/\/send(Photo|Document)$/)) {
      const form = await formOf(call);
      if (form.get("chat_id") === chat) uploads.push({ method: call.path.split("/").pop(), form });
    }
    return uploads;
  };
  const deliveryRecords = (runId: string) =>
    host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type LIKE 'delivery.%' ORDER BY seq", [runId]);

  it("sends an artifact the run created after its text: an image as a photo in the same topic, quoting nothing twice", async () => {
    const u = update("-102100", { text: "attach chart.png", message_thread_id: 5, is_topic_message: true });
    await post(u);
    const [upload] = await waitFor(async () => (await uploadsTo("-102100")).length > 0 && uploadsTo("-102100"), 15_000, "the photo");
    expect(upload.method).toBe("sendPhoto");
    expect(upload.form.get("message_thread_id")).toBe("5");
    // The text went first and quoted the user's message; the photo follows it without quoting again.
    expect(sendsTo("-102100")[0].body).toMatchObject({ text: "here is chart.png", reply_parameters: { message_id: u.message.message_id } });
    expect(upload.form.get("reply_parameters")).toBeNull();
    const photo = await fileOf(upload.form, "photo");
    expect(photo).toMatchObject({ name: "chart.png", type: "image/png" });
    expect(photo.bytes.equals(ANSWER_FILE)).toBe(true);

    const runId = contextFor("attach chart.png")[0].run_id;
    const records = await waitFor(async () => {
      const rows = await deliveryRecords(runId);
      return rows.length >= 4 && rows;
    });
    const sent = JSON.parse(records[3].data_json);
    expect(records[3].event_type).toBe("delivery.succeeded");
    expect(sent).toMatchObject({ operation: "send_file", bytes: ANSWER_FILE.length, message_id: expect.any(String) });
    expect(sent.artifact_id).toMatch(/^art_/);
    // The ledger names the stored artifact, not its bytes.
    const [created] = await host.query<{ data_json: string }>("SELECT data_json FROM run_event WHERE run_id = ? AND type = 'artifact.created'", [runId]);
    expect(JSON.parse(created.data_json)).toEqual({ artifact_type: "image", mime_type: "image/png", name: "chart.png", artifact_id: sent.artifact_id, size_bytes: ANSWER_FILE.length, sha256: createHash("sha256").update(ANSWER_FILE).digest("hex") });
    expect(contextFor("attach chart.png")[0].delivery.platform_capabilities.files).toEqual({ max_bytes: 50_000_000 });
  });

  it("streams a file over 10 MB whole, with its length declared: an image too large for a photo goes as a document", async () => {
    // Uploaded chunked, without a length: stored as a multipart upload of three parts (5 + 5 + 2 MiB).
    const size = 12 * 1024 * 1024;
    await post(update("-102150", { text: `upload big.png ${size} chunked` }));
    const [upload] = await waitFor(async () => (await uploadsTo("-102150")).length > 0 && uploadsTo("-102150"), 30_000, "the document");
    expect(upload.method).toBe("sendDocument");
    const document = await fileOf(upload.form, "document");
    expect(document).toMatchObject({ name: "big.png", type: "image/png" });
    expect(document.bytes.equals(largeFile(size))).toBe(true);
    const [call] = fake.callsTo(/\/sendDocument$/).filter((c) => c.raw.includes('name="chat_id"\r\n\r\n-102150'));
    expect(call.headers["transfer-encoding"]).toBeUndefined();
    expect(Number(call.headers["content-length"])).toBe(call.bytes.length);
    const runId = contextFor(`upload big.png ${size} chunked`)[0].run_id;
    const records = await waitFor(async () => {
      const rows = (await deliveryRecords(runId)).filter((r) => r.event_type === "delivery.succeeded").map((r) => JSON.parse(r.data_json));
      return rows.some((r) => r.operation === "send_file") && rows;
    });
    expect(records.find((r) => r.operation === "send_file")).toMatchObject({ bytes: size });
  });

  it("sends anything but an image as a document, quoting the user when no text went first", async () => {
    const u = update("-102200", { text: "attachonly report.pdf" });
    await post(u);
    const [upload] = await waitFor(async () => (await uploadsTo("-102200")).length > 0 && uploadsTo("-102200"), 15_000, "the document");
    expect(upload.method).toBe("sendDocument");
    expect(JSON.parse(String(upload.form.get("reply_parameters")))).toMatchObject({ message_id: u.message.message_id });
    const doc = await fileOf(upload.form, "document");
    expect(doc).toMatchObject({ name: "report.pdf", type: "application/pdf" });
    expect(doc.bytes.equals(ANSWER_FILE)).toBe(true);
    // An answer of files (and an image by URL) that were sent needs no "no text" notice.
    await host.waitForRun(contextFor("attachonly report.pdf")[0].run_id);
    await new Promise((r) => setTimeout(r, 300));
    expect(sendsTo("-102200")).toEqual([]);
  });

  it("sends back an image the answer names by artifact id: the user's own photo", async () => {
    await post(update("-102300", { caption: "show input", photo: [{ file_id: "big", width: 800, height: 800 }] }));
    const [upload] = await waitFor(async () => (await uploadsTo("-102300")).length > 0 && uploadsTo("-102300"), 15_000, "the photo");
    expect((await fileOf(upload.form, "photo")).bytes.equals(Buffer.from(PHOTO))).toBe(true);
    expect(sendsTo("-102300")[0].body.text).toBe("showing input");
  });

  it("never sends another conversation's artifact, whatever the runner names; the text still goes and the refusal is recorded", async () => {
    await post(update("-102400", { caption: "mine", photo: [{ file_id: "big", width: 800, height: 800 }] }));
    await waitFor(() => sendsTo("-102400").length > 0);
    const theirs = contextFor("mine")[0].input.attachments[0].artifact_id;
    await post(update("-102500", { text: `show ${theirs}` }));
    await waitFor(() => sendsTo("-102500").length > 0, 15_000, "the text");
    const runId = contextFor(`show ${theirs}`)[0].run_id;
    const failed = await waitFor(async () => (await deliveryRecords(runId)).find((r) => r.event_type === "delivery.failed"));
    expect(JSON.parse(failed.data_json)).toMatchObject({ operation: "send_file", artifact_id: theirs, code: "artifact_unavailable", will_retry: false });
    expect(await uploadsTo("-102500")).toEqual([]);
  });

  it("tells the user when an answer of files could send none of them", async () => {
    await post(update("-102600", { text: "attachonly report.pdf" }));
    const [notice] = await waitFor(() => sendsTo("-102600").length > 0 && sendsTo("-102600"), 15_000, "the notice");
    expect(notice.body.text).toBe("(The answer's files could not be sent here.)");
    expect(fake.callsTo(/\/sendDocument$/).filter((c) => c.raw.includes('name="chat_id"\r\n\r\n-102600'))).toHaveLength(1);
  });
});

describe("Telegram: answers' Markdown rendered", () => {
  const ANSWER = [
    "# Plan for `parse_config`",
    "Use **bold _and italic_**, ~~old~~ and `a < b && c`; see [the docs](https://example.com/wiki/Foo_(bar)) or https://example.com/snake_case/__init__.py.",
    "- keep snake_case_names & <tags>",
    "> a *quote*",
    "```python",
    'print(a < b and "&")',
    "```",
  ].join("\n");
  const RENDERED = [
    "<b>Plan for <code>parse_config</code></b>",
    'Use <b>bold <i>and italic</i></b>, <s>old</s> and <code>a &lt; b &amp;&amp; c</code>; see <a href="https://example.com/wiki/Foo_(bar)">the docs</a> or https://example.com/snake_case/__init__.py.',
    "• keep snake_case_names &amp; &lt;tags&gt;",
    "<blockquote>a <i>quote</i></blockquote>",
    '<pre><code class="language-python">print(a &lt; b and "&amp;")</code></pre>',
  ].join("\n");
  const sentTo = (chat: string) => fake.callsTo(/\/(sendMessage|editMessageText)$/).filter((c) => String(c.body.chat_id) === chat);

  it("sends an answer's Markdown as Telegram HTML; the ledger, the Transcript and the trail keep the Markdown as the runner sent it", async () => {
    await post(update("-103000", { text: `samefinal ${ANSWER}` }));
    const [send] = await waitFor(() => sendsTo("-103000").length > 0 && sendsTo("-103000"), 15_000, "the answer");
    expect(send.body).toMatchObject({ parse_mode: "HTML", text: RENDERED });
    const runId = contextFor(`samefinal ${ANSWER}`)[0].run_id;
    await host.waitForRun(runId);
    expect(await recordedAnswer(host, runId)).toEqual({ ledger: ANSWER, transcript: ANSWER });
    const sent = await waitFor(async () => (await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE run_id = ? AND event_type = 'delivery.succeeded'", [runId]))[0]);
    expect(JSON.parse(sent.data_json)).toMatchObject({ operation: "send", attempt: 1, chars: ANSWER.length });
  });

  it("streams Markdown with every edit well-formed HTML: an unpaired marker is text, a code block still open is closed", async () => {
    const words = "**Step one** uses `x < y` & then:\n```js\nconst a = 1;\nconst b = a && 2;\nlet c = [a, b];\nreturn c;\n```\n~~done~~ *ok*";
    await post(update("-103100", { text: `stream ${words}` }));
    const final = '<b>Step one</b> uses <code>x &lt; y</code> &amp; then:\n<pre><code class="language-js">const a = 1;\nconst b = a &amp;&amp; 2;\nlet c = [a, b];\nreturn c;</code></pre>\n<s>done</s> <i>ok</i>';
    await waitFor(() => editsOf("-103100").some((c) => c.body.text === final), 20_000, "the final edit");
    const bodies = sentTo("-103100").map((c) => c.body);
    expect(bodies.length).toBeGreaterThan(2);
    for (const body of bodies) {
      expect(body.parse_mode).toBe("HTML");
      expect(telegramHtmlProblem(body.text), body.text).toBeNull();
    }
    // A draft shown mid-block: the block open in the Markdown, closed in the HTML.
    expect(bodies.some((b) => b.text.includes('<pre><code class="language-js">') && !b.text.includes("done"))).toBe(true);
    expect(sendsTo("-103100")).toHaveLength(1);
  });

  it("sends the same text again as plain text when Telegram cannot parse its HTML, a send and each edit, and the trail says so", async () => {
    await post(update(REFUSING_HTML, { text: "stream **one** two three four five" }));
    const source = "**one** two three four five";
    await waitFor(() => editsOf(REFUSING_HTML).some((c) => c.body.text === source && c.body.parse_mode === undefined), 20_000, "the final text, plain");
    const [refused, plain] = sendsTo(REFUSING_HTML);
    expect(refused.body).toMatchObject({ parse_mode: "HTML", text: "<b>one</b>" });
    expect(plain.body.parse_mode).toBeUndefined();
    expect(plain.body.text).toBe("**one**");
    expect(sendsTo(REFUSING_HTML)).toHaveLength(2);
    // Every formatted edit refused was made again, at once, as the same text plain.
    const edits = editsOf(REFUSING_HTML);
    for (const [i, edit] of edits.entries()) if (edit.body.parse_mode === "HTML") expect(edits[i + 1].body).toMatchObject({ message_id: edit.body.message_id, text: expect.any(String) });
    expect(edits.filter((e) => e.body.parse_mode === undefined).length).toBe(edits.filter((e) => e.body.parse_mode === "HTML").length);
    const runId = contextFor("stream **one** two three four five").find((c) => c.conversation.conversation_id === REFUSING_HTML)!.run_id;
    await host.waitForRun(runId);
    const trail = await waitFor(async () => {
      const rows = (await host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type LIKE 'delivery.%' ORDER BY seq", [runId])).map((r) => ({ type: r.event_type, ...JSON.parse(r.data_json) }));
      return rows.some((r) => r.type === "delivery.succeeded" && r.operation === "edit") && rows;
    });
    expect(trail.filter((r) => r.operation === "send").map(({ type, attempt, status, will_retry, retry_in_ms, format }) => ({ type, attempt, status, will_retry, retry_in_ms, format }))).toEqual([
      { type: "delivery.attempted", attempt: 1, status: undefined, will_retry: undefined, retry_in_ms: undefined, format: undefined },
      { type: "delivery.failed", attempt: 1, status: 400, will_retry: true, retry_in_ms: 0, format: undefined },
      { type: "delivery.attempted", attempt: 2, status: undefined, will_retry: undefined, retry_in_ms: undefined, format: "plain" },
      { type: "delivery.succeeded", attempt: 2, status: undefined, will_retry: undefined, retry_in_ms: undefined, format: "plain" },
    ]);
    expect(trail.find((r) => r.type === "delivery.failed")!.error).toMatch(/^Bad Request: can't parse entities/);
  });

  it("shows a table as an aligned monospaced block and lists with their numbers and nesting; a table longer than a message goes on in the next under its header again", async () => {
    await post(update("-103400", { text: `samefinal ${TABLE_ANSWER}` }));
    const [send] = await waitFor(() => sendsTo("-103400").length > 0 && sendsTo("-103400"), 15_000, "the answer");
    expect(send.body).toMatchObject({
      parse_mode: "HTML",
      text: TABLE_ANSWER_TELEGRAM,
    });
    const rows = Array.from({ length: 300 }, (_, i) => `| item ${i} | ${i * 7} |`).join("\n");
    await post(update("-103401", { text: `samefinal Stock:\n| Item | Count |\n|---|--:|\n${rows}\nThat is all.` }));
    const parts = await waitFor(() => sendsTo("-103401").length >= 2 && sendsTo("-103401").map((c) => String(c.body.text)), 15_000, "the answer's parts");
    expect(parts).toHaveLength(2);
    expect(parts[0].startsWith("Stock:\n<pre>Item     │ Count\n─────────┼──────\nitem 0   │     0\n")).toBe(true);
    expect(parts[1].startsWith("<pre>Item     │ Count\n─────────┼──────\nitem ")).toBe(true);
    expect(parts[1].endsWith("item 299 │  2093</pre>\nThat is all.")).toBe(true);
    for (const part of parts) {
      expect(telegramHtmlProblem(part)).toBeNull();
      expect(part.replace(/<[^>]*>/g, "").length).toBeLessThanOrEqual(4096);
    }
  });

  it("streams a table with every edit well-formed HTML and no line of pipes: a header waits for its delimiter row, from which on it is a table", async () => {
    const words = "Totals:\n| Item | Qty |\n|---|--:|\n| pens | 3 |\n| paper | 120 |\ndone";
    await post(update("-103500", { text: `stream ${words}` }));
    const final = "Totals:\n<pre>Item  │ Qty\n──────┼────\npens  │   3\npaper │ 120</pre>\ndone";
    await waitFor(() => editsOf("-103500").some((c) => c.body.text === final), 20_000, "the final edit");
    const bodies = sentTo("-103500").map((c) => c.body);
    expect(bodies.length).toBeGreaterThan(2);
    for (const body of bodies) {
      expect(body.parse_mode).toBe("HTML");
      expect(telegramHtmlProblem(body.text), body.text).toBeNull();
      expect(body.text).not.toContain("|");
    }
    expect(bodies.some((b) => b.text.includes("<pre>Item") && !b.text.includes("done"))).toBe(true);
  });

  it("sends the answer as it is for an agent whose delivery_policy.format is plain", async () => {
    const agent = { agent_id: "tg-plain", name: "plain", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: "-103300", bot_id: botId }, delivery_policy: { format: "plain" } };
    const created = await host.admin("POST", "/v1/admin/agents", agent);
    expect(created.status).toBe(201);
    expect(created.body.delivery_policy).toMatchObject({ format: "plain", streaming: true });
    expect((await host.admin("POST", "/v1/admin/agents", { ...agent, agent_id: "tg-loud", delivery_policy: { format: "html" } })).status).toBe(400);
    await post(update("-103300", { text: `samefinal ${ANSWER}` }));
    const [send] = await waitFor(() => sendsTo("-103300").length > 0 && sendsTo("-103300"), 15_000, "the answer");
    expect(send.body.parse_mode).toBeUndefined();
    expect(send.body.text).toBe(ANSWER);
  });
});
