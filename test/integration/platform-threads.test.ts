import { createHmac } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { formOf, startFakePlatform, telegramBotApi, waitFor, type PlatformCall } from "../support/fake-platform";
import { callHostApi } from "../support/host-api";
import { startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { SLACK_AUTH_TEST } from "../support/slack-events";

/**
 * Threads on chat platforms, end to end: each thread (Slack thread_ts, Telegram forum topic) is its own
 * conversation: its runs read only its history and its conversation state, and the operator finds it by thread_id.
 */
const TG_TOKEN = "123456:TEST-telegram-threads-abcdef";
const TG_SECRET = "tg-threads-secret-0123456789";
const SLACK_TOKEN = "xoxb-TEST-slack-threads-1234567890";
const SLACK_SECRET = "slack-threads-signing-secret-0123";

let host: TestHost;
let tg: Awaited<ReturnType<typeof startFakePlatform>>;
let slack: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
let tgBot: { bot_id: string; webhook_url: string };
let slackBot: { bot_id: string; webhook_url: string };
const seen = new Map<string, any>();
let slackTs = 1_700_000_000;
/** Forum topics Telegram refuses posts in: deleted ("message thread not found") or closed; chats whose General topic is closed too. */
const deletedTopics = new Set<number>();
const closedTopics = new Set<number>();
const closedGenerals = new Set<string>();
/** A post's fields: its JSON, or an upload's form. */
const fieldsOf = async (call: PlatformCall): Promise<Record<string, unknown>> => call.body ?? Object.fromEntries(await formOf(call));
const tgBotApi = telegramBotApi(TG_TOKEN);
async function telegramApi(call: PlatformCall) {
  if (/\/send(Message|Photo|Document)$/.test(call.path)) {
    const fields = await fieldsOf(call);
    const topic = fields.message_thread_id === undefined ? null : Number(fields.message_thread_id);
    if (topic !== null && deletedTopics.has(topic)) return { status: 400, json: { ok: false, error_code: 400, description: "Bad Request: message thread not found" } };
    if (topic === null ? closedGenerals.has(String(fields.chat_id)) : closedTopics.has(topic)) return { status: 400, json: { ok: false, error_code: 400, description: "Bad Request: TOPIC_CLOSED" } };
  }
  return tgBotApi(call);
}

beforeAll(async () => {
  tg = await startFakePlatform(telegramApi);
  slack = await startFakePlatform((call) => (call.path === "/chat.postMessage" ? { json: { ok: true, ts: `${++slackTs}.000100` } } : { json: call.path === "/auth.test" ? SLACK_AUTH_TEST : { ok: true } }));
  runner = await startAdHocRunner({
    name: "threads",
    runners: [{ name: "default", label: { en_US: "threads" }, capabilities: { streaming: false }, permissions: { history: ["page"], events: ["get", "page"] } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const api = (action: string, params: Record<string, unknown> = {}) => callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, action, params);
      const history = await api("history.page", { limit: 100, direction: "backward" });
      const count = await api("state.get", { scope: "conversation", key: "count" });
      const n = (count.body.data?.value ?? 0) + 1;
      await api("state.set", { scope: "conversation", key: "count", value: n });
      seen.set(ctx.input.text, { ctx, history: history.body.data?.items?.map((i: any) => i.content), count: n });
      const w = resultWriter(res, ctx.run_id);
      // `… with a file`: the answer brings a file too.
      if (String(ctx.input.text).endsWith("with a file")) w.send("artifact.created", { artifact_type: "file", mime_type: "text/plain", name: "notes.txt", content_base64: Buffer.from("notes").toString("base64") });
      w.reply(`re ${ctx.input.text}`);
    },
  });
  host = await startTestHost();
  tgBot = (await host.admin("POST", "/v1/admin/bots", { platform: "telegram", api_base_url: tg.url, credentials: { bot_token: TG_TOKEN, secret_token: TG_SECRET } })).body;
  slackBot = (await host.admin("POST", "/v1/admin/bots", { platform: "slack", workspace_id: "acme", api_base_url: slack.url, credentials: { bot_token: SLACK_TOKEN, signing_secret: SLACK_SECRET } })).body;
  for (const bot of [tgBot, slackBot]) await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: `threads-${bot.bot_id}`, scope: { type: "bot", id: bot.bot_id } });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await tg?.close();
  await slack?.close();
});

let updateId = 5_000;
async function telegram(chat: number, text: string, extra: Record<string, unknown> = {}) {
  const id = ++updateId;
  const message = { message_id: id, date: Math.floor(Date.now() / 1000), chat: { id: chat, type: "supergroup", is_forum: true }, from: { id: 42, is_bot: false, first_name: "Ada" }, text, ...extra };
  const res = await fetch(tgBot.webhook_url, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": TG_SECRET }, body: JSON.stringify({ update_id: id, message }) });
  expect(res.status).toBe(200);
  return waitFor(() => seen.get(text), 15_000, `the run of ${text}`);
}

let slackEvent = 0;
async function slackSay(channel: string, text: string, extra: Record<string, unknown> = {}) {
  const body = JSON.stringify({ type: "event_callback", team_id: "T1", event_id: `EvTh${++slackEvent}`, event_time: Math.floor(Date.now() / 1000), event: { type: "message", channel, channel_type: "channel", user: "U42", text, ts: `${1_800_000_000 + slackEvent}.000200`, ...extra } });
  const timestamp = Math.floor(Date.now() / 1000);
  const signature = `v0=${createHmac("sha256", SLACK_SECRET).update(`v0:${timestamp}:${body}`).digest("hex")}`;
  const res = await fetch(slackBot.webhook_url, { method: "POST", headers: { "content-type": "application/json", "x-slack-request-timestamp": String(timestamp), "x-slack-signature": signature }, body });
  expect(res.status).toBe(200);
  return waitFor(() => seen.get(text), 15_000, `the run of ${text}`);
}

const transcript = async (q: Record<string, string>) => (await host.admin("GET", `/v1/conversations/transcript?${new URLSearchParams(q)}`)).body.items.map((i: any) => i.content);

describe("Telegram forum topics are conversations of their own", () => {
  it("keeps each topic's history, state and replies apart from the chat's and the other topic's", async () => {
    const chat = -100777;
    await telegram(chat, "root one");
    const a1 = await telegram(chat, "topic A one", { message_thread_id: 11, is_topic_message: true });
    await telegram(chat, "topic B one", { message_thread_id: 22, is_topic_message: true });
    const a2 = await telegram(chat, "topic A two", { message_thread_id: 11, is_topic_message: true, reply_to_message: { message_id: 11 } });
    // A reply chain outside topics is the chat's own conversation.
    const root2 = await telegram(chat, "root reply", { message_thread_id: 5001, reply_to_message: { message_id: 5001 } });
    expect(a1.ctx.conversation).toMatchObject({ conversation_id: String(chat), thread_id: "11" });
    expect(a2.history).toEqual(["topic A two", "re topic A one", "topic A one"]);
    expect(a2.count).toBe(2);
    expect(root2.ctx.conversation.thread_id).toBeNull();
    expect(root2.history).toEqual(["root reply", "re root one", "root one"]);
    expect(root2.count).toBe(2);
    const sendsIn = (topic: number | undefined) => tg.callsTo(/\/sendMessage$/).filter((c) => c.body.chat_id === String(chat) && c.body.message_thread_id === topic).map((c) => c.body.text);
    await waitFor(() => sendsIn(undefined).length === 2 && sendsIn(11).length === 2);
    expect(sendsIn(11)).toEqual(["re topic A one", "re topic A two"]);
    expect(sendsIn(22)).toEqual(["re topic B one"]);
    expect(await transcript({ conversation_id: String(chat), bot_id: tgBot.bot_id, thread_id: "22" })).toEqual(["re topic B one", "topic B one"]);
  });
});

describe("a forum topic gone while its run went on (README: Delivery)", () => {
  const postsIn = (chat: number) => tg.calls.filter((c) => /\/send(Message|Photo|Document)$/.test(c.path) && c.reply && String(c.body?.chat_id ?? /name="chat_id"\r\n\r\n([^\r]*)/.exec(c.raw)?.[1]) === String(chat));
  const deliveries = async (runId: string) =>
    (await host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type IN ('delivery.succeeded', 'delivery.failed') ORDER BY seq", [runId])).map((r) => ({ type: r.event_type, ...JSON.parse(r.data_json) }));
  /** Each post in the chat: its method, the status it was answered, and its fields. */
  const shown = async (chat: number) => Promise.all(postsIn(chat).map(async (c): Promise<Record<string, unknown>> => ({ method: c.path.split("/").pop(), status: c.reply!.status ?? 200, ...(await fieldsOf(c)) })));

  it("deleted: the answer and its file go to the chat instead, after a line saying why, quoting nothing", async () => {
    const chat = -100991;
    deletedTopics.add(44);
    const run = await telegram(chat, "gone topic with a file", { message_thread_id: 44, is_topic_message: true });
    await waitFor(() => postsIn(chat).length >= 4, 15_000, "the answer in the chat");
    const posts = await shown(chat);
    expect(posts.map((p) => [p.method, p.status, p.message_thread_id ?? null, p.text ?? null])).toEqual([
      ["sendMessage", 400, 44, "re gone topic with a file"],
      ["sendMessage", 200, null, "(The topic this answers no longer exists: the answer is here instead.)"],
      ["sendMessage", 200, null, "re gone topic with a file"],
      ["sendDocument", 200, null, null],
    ]);
    expect(posts.slice(1).every((p) => p.reply_parameters === undefined)).toBe(true);
    await host.waitForRun(run.ctx.run_id);
    const records = await waitFor(async () => ((await deliveries(run.ctx.run_id)).length >= 2 ? deliveries(run.ctx.run_id) : false), 15_000, "the delivery records");
    expect(records.map((r) => [r.type, r.operation])).toEqual([
      ["delivery.succeeded", "send"],
      ["delivery.succeeded", "send_file"],
    ]);
  });

  it("closed: the answer goes to the chat, saying the topic is closed; with the chat's General topic closed too, it is refused once and tried no more", async () => {
    closedTopics.add(55);
    await telegram(-100992, "closed topic", { message_thread_id: 55, is_topic_message: true });
    await waitFor(() => postsIn(-100992).length >= 3, 15_000, "the answer in the chat");
    expect((await shown(-100992)).map((p) => [p.status, p.message_thread_id ?? null, p.text])).toEqual([
      [400, 55, "re closed topic"],
      [200, null, "(The topic this answers is closed: the answer is here instead.)"],
      [200, null, "re closed topic"],
    ]);

    closedTopics.add(66);
    closedGenerals.add("-100993");
    const run = await telegram(-100993, "closed everywhere with a file", { message_thread_id: 66, is_topic_message: true });
    await host.waitForRun(run.ctx.run_id);
    const records = await waitFor(async () => ((await deliveries(run.ctx.run_id)).length >= 1 ? deliveries(run.ctx.run_id) : false), 15_000, "the delivery record");
    // Settled: nothing more is tried after the one refusal.
    await new Promise((r) => setTimeout(r, 1_000));
    expect((await shown(-100993)).map((p) => [p.method, p.status, p.message_thread_id ?? null])).toEqual([
      ["sendMessage", 400, 66],
      ["sendMessage", 400, null],
    ]);
    expect(await deliveries(run.ctx.run_id)).toEqual([expect.objectContaining({ type: "delivery.failed", operation: "send", code: "telegram_400", error: "Bad Request: TOPIC_CLOSED", will_retry: false })]);
    expect(records).toHaveLength(1);
  });
});

describe("Slack threads are conversations of their own", () => {
  it("keeps a thread's history, state and replies apart from its channel's", async () => {
    await slackSay("C-TH", "channel one");
    const t1 = await slackSay("C-TH", "thread one", { thread_ts: "1799999999.000100" });
    const t2 = await slackSay("C-TH", "thread two", { thread_ts: "1799999999.000100", subtype: "thread_broadcast" });
    const c2 = await slackSay("C-TH", "channel two");
    expect(t1.ctx.conversation).toMatchObject({ conversation_id: "C-TH", thread_id: "1799999999.000100", workspace_id: "acme" });
    expect(t2.history).toEqual(["thread two", "re thread one", "thread one"]);
    expect(t2.count).toBe(2);
    expect(c2.history).toEqual(["channel two", "re channel one", "channel one"]);
    expect(c2.count).toBe(2);
    const posts = await waitFor(() => slack.callsTo(/^\/chat\.postMessage$/).length === 4 && slack.callsTo(/^\/chat\.postMessage$/));
    expect(posts.filter((p) => p.body.thread_ts === "1799999999.000100").map((p) => p.body.text)).toEqual(["re thread one", "re thread two"]);
    expect(await transcript({ conversation_id: "C-TH", workspace_id: "acme", bot_id: slackBot.bot_id, thread_id: "1799999999.000100" })).toEqual(["re thread two", "thread two", "re thread one", "thread one"]);
  });
});

const eventTypes = async (q: Record<string, string>) => (await host.admin("GET", `/v1/conversations/events?${new URLSearchParams(q)}`)).body.items.map((i: any) => i.source_event_type ?? i.event_type);

describe("what the host does not run is found where it happened (README: 'in its chat when the payload names one')", () => {
  it("Telegram: a game's button pressed under the bot's answer in a forum topic is in that topic's EventLog", async () => {
    const chat = -100888;
    await telegram(chat, "topic C one", { message_thread_id: 33, is_topic_message: true });
    const id = ++updateId;
    const answer = { message_id: 9001, date: Math.floor(Date.now() / 1000), chat: { id: chat, type: "supergroup", is_forum: true }, from: { id: 123456, is_bot: true, first_name: "Bot" }, message_thread_id: 33, is_topic_message: true, text: "re topic C one" };
    // A game's button carries no callback_data: nothing runs (a callback button's press does, README "Chat platforms").
    const callbackQuery = { id: "cbq-1", from: { id: 42, is_bot: false, first_name: "Ada" }, chat_instance: "ci-1", game_short_name: "more", message: answer };
    const res = await fetch(tgBot.webhook_url, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": TG_SECRET }, body: JSON.stringify({ update_id: id, callback_query: callbackQuery }) });
    expect(res.status).toBe(200);
    expect(await eventTypes({ conversation_id: String(chat), bot_id: tgBot.bot_id, thread_id: "33" })).toContain("callback_query");
  });

  it("Slack: a reaction to a channel message is in that channel's EventLog", async () => {
    await slackSay("C-RX", "react to me");
    const body = JSON.stringify({ type: "event_callback", team_id: "T1", event_id: "EvReact1", event_time: Math.floor(Date.now() / 1000), event: { type: "reaction_added", user: "U42", reaction: "eyes", item_user: "U42", item: { type: "message", channel: "C-RX", ts: "1800000001.000200" }, event_ts: `${Math.floor(Date.now() / 1000)}.000300` } });
    const timestamp = Math.floor(Date.now() / 1000);
    const signature = `v0=${createHmac("sha256", SLACK_SECRET).update(`v0:${timestamp}:${body}`).digest("hex")}`;
    const res = await fetch(slackBot.webhook_url, { method: "POST", headers: { "content-type": "application/json", "x-slack-request-timestamp": String(timestamp), "x-slack-signature": signature }, body });
    expect(res.status).toBe(200);
    expect(await eventTypes({ conversation_id: "C-RX", workspace_id: "acme", bot_id: slackBot.bot_id })).toContain("reaction_added");
  });
});
