import { createHmac } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakePlatform, telegramBotApi, waitFor, type FakeReply, type PlatformCall } from "../support/fake-platform";
import { callHostApi, deferred } from "../support/host-api";
import { startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { putAgent } from "../support/scripted-runner";
import { SLACK_AUTH_TEST } from "../support/slack-events";

/**
 * An agent's trigger_policy `group_messages: "addressed"`: where its bot gets every group message (Slack subscribed to
 * `message.channels`, a Telegram bot that is a group admin, Lark with the permission to read all group messages), it
 * answers only what addresses the bot (a mention, a reply to the bot, a command, one of its prefixes), and records the
 * rest, with its transcript item for later runs, starting nothing: `unaddressed`. Direct messages always run. Through
 * each platform's real webhook path, with one steering runner that reads the history before each message.
 */
const TG_TOKEN = "123456:TEST-telegram-bot-token-triggers";
const TG_SECRET = "tg-secret-token-triggers-0123";
const TG_USERNAME = "TriggerTestBot";
const SLACK_TOKEN = "xoxb-TEST-slack-triggers-token-1234567890";
const SLACK_SECRET = "slack-triggers-signing-secret-0123456789";
const SLACK_BOT_USER = "UBOT";
/** A Slack thread the bot's own message started. */
const SLACK_BOT_THREAD = "1950000000.000100";
const LARK = { app_id: "cli_trigger_app", app_secret: "lark-trigger-secret-0123456789", verification_token: "lark-trigger-verification-token" };
const LARK_TENANT_TOKEN = "t-trigger-tenant-token-0123456789";
const LARK_OPEN_ID = "ou_trigger_bot";
const POLICY = { group_messages: "addressed", prefixes: ["!ai"] };
/** Lark messages the API gives by id (GET im/v1/messages/{id}), for a reply's parent. */
const larkMessages = new Map<string, Record<string, unknown>>();

let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const bots = { telegram: { botId: "", url: "" }, slack: { botId: "", url: "" }, lark: { botId: "", url: "" } };
/** Each run as its runner began it, and the words of the history before its message. */
const begun: { runId: string; conversation: string; text: string; history: string[]; attachments: number }[] = [];
const gates = new Map<string, ReturnType<typeof deferred<void>>>();
const gate = (tag: string) => gates.get(tag) ?? gates.set(tag, deferred()).get(tag)!;

const telegram = telegramBotApi(TG_TOKEN);
let slackTs = 1_900_000_000;
function platformApi(call: PlatformCall): FakeReply {
  // Who the bot token is (its workspace T1, as the envelopes say): the host checks every request against it.
  if (call.path === "/auth.test") return { json: SLACK_AUTH_TEST };
  if (call.path === `/bot${TG_TOKEN}/getMe`) return { json: { ok: true, result: { id: 123456, is_bot: true, first_name: "Trig", username: TG_USERNAME } } };
  if (call.path.startsWith("/bot") || call.path.startsWith("/file/")) return telegram(call);
  if (call.path === "/chat.postMessage") return { json: { ok: true, channel: call.body.channel, ts: `${++slackTs}.000100` } };
  if (call.path === "/chat.update") return { json: { ok: true, channel: call.body.channel, ts: call.body.ts } };
  // A Slack thread's parent: the one the bot's own message started.
  if (call.path === "/conversations.replies" && new URLSearchParams(call.raw).get("ts") === SLACK_BOT_THREAD) {
    return { json: { ok: true, messages: [{ type: "message", user: SLACK_BOT_USER, bot_id: "B0BOT", text: "Lunch today: soup", ts: SLACK_BOT_THREAD, thread_ts: SLACK_BOT_THREAD }] } };
  }
  if (call.path === "/open-apis/auth/v3/tenant_access_token/internal") return { json: { code: 0, msg: "ok", tenant_access_token: LARK_TENANT_TOKEN, expire: 7200 } };
  if (call.path === "/open-apis/bot/v3/info") return { json: { code: 0, msg: "ok", bot: { activate_status: 2, app_name: "Trig", open_id: LARK_OPEN_ID } } };
  if (/^\/open-apis\/im\/v1\/messages\/[^/]+\/reply$/.test(call.path)) return { json: { code: 0, msg: "success", data: { message_id: `om_answer_${++slackTs}` } } };
  const larkRead = /^\/open-apis\/im\/v1\/messages\/([^/]+)$/.exec(call.path);
  if (larkRead && call.method === "GET" && larkMessages.has(larkRead[1])) return { json: { code: 0, msg: "success", data: { items: [larkMessages.get(larkRead[1])] } } };
  if (larkRead) return { json: { code: 0, msg: "success", data: {} } };
  return { status: 404, json: { ok: false, error: "unknown_method" } };
}

beforeAll(async () => {
  fake = await startFakePlatform(platformApi);
  runner = await startAdHocRunner({
    name: "group-triggers",
    runners: [{ name: "default", label: { en_US: "t" }, capabilities: { streaming: true, steering: true }, permissions: { history: ["page"] } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const text = String(ctx.input.text ?? "");
      const api = (action: string, params: Record<string, unknown> = {}) => callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, action, params);
      const page = await api("history.page", { before_cursor: ctx.context.latest_cursor, limit: 50 });
      const history = (page.body.data?.items ?? []).map((i: { content: string | null }) => i.content).reverse();
      begun.push({ runId: ctx.run_id, conversation: ctx.conversation.conversation_id, text, history, attachments: ctx.input.attachments.length });
      if (text.startsWith("hold ")) await gate(text.slice("hold ".length)).promise;
      const pulled = (await api("steering.pull", { mode: "all" })).body.data.items.map((i: { input: { text: string } }) => i.input.text);
      resultWriter(res, ctx.run_id).reply(`re: ${[text, ...pulled].join(" + ")}`);
    },
  });
  host = await startTestHost();
  const credentials = { telegram: { bot_token: TG_TOKEN, secret_token: TG_SECRET }, slack: { bot_token: SLACK_TOKEN, signing_secret: SLACK_SECRET }, lark: LARK };
  for (const platform of ["telegram", "slack", "lark"] as const) {
    const created = await host.admin("POST", "/v1/admin/bots", { platform, api_base_url: fake.url, credentials: credentials[platform] });
    expect(created.status).toBe(201);
    bots[platform] = { botId: created.body.bot_id, url: created.body.webhook_url };
    const agentId = `triggers-${platform}`;
    await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId, scope: { type: "bot", id: created.body.bot_id } });
    await putAgent(host, { agent_id: agentId, runner_id: runner.runnerId(), scope: { type: "bot", id: created.body.bot_id }, trigger_policy: POLICY });
  }
});
afterAll(async () => {
  for (const g of gates.values()) g.resolve();
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

const textsIn = (conversation: string) => begun.filter((b) => b.conversation === conversation).map((b) => b.text);
const eventRow = async (eventId: string) =>
  (await host.query<{ disposition: string; run_id: string | null; agent_id: string | null }>("SELECT disposition, run_id, agent_id FROM event_log WHERE event_id = ?", [eventId]))[0];
const runsIn = (conversation: string) => host.query<{ run_id: string }>("SELECT run_id FROM run WHERE conversation_id = ?", [conversation]);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** The run of an event that started one, once it has ended: the next message then finds no run to be steered into. */
async function answered(eventId: string): Promise<void> {
  const row = await waitFor(async () => (await eventRow(eventId))?.run_id ?? false, 15_000, `the run of ${eventId}`);
  await host.waitForRun(row);
}

// --- Telegram ---
let updateId = 70_000;
let messageId = 500;
/** A message from Ada in `chat` (a negative id is a supergroup, else a private chat), Telegram's fields in `extra`. */
function tgMessage(chat: string, text: string, extra: Record<string, unknown> = {}) {
  const message = { message_id: ++messageId, date: Math.floor(Date.now() / 1000), chat: { id: Number(chat), type: Number(chat) < 0 ? "supergroup" : "private" }, from: { id: 42, is_bot: false, first_name: "Ada" }, text, ...extra };
  return { update_id: ++updateId, message };
}
const mention = (text: string, name: string) => ({ type: "mention", offset: text.indexOf(name), length: name.length });
async function tgPost(update: unknown): Promise<void> {
  const res = await fetch(bots.telegram.url, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": TG_SECRET }, body: JSON.stringify(update) });
  expect([res.status, await res.text()]).toEqual([200, '{"ok":true}']);
}
const tgEvent = (u: { update_id: number }) => `telegram:${bots.telegram.botId}:${u.update_id}`;

// --- Slack ---
const slackSign = (timestamp: number, body: string) => `v0=${createHmac("sha256", SLACK_SECRET).update(`v0:${timestamp}:${body}`).digest("hex")}`;
let slackEvent = 0;
async function slackPost(event: Record<string, unknown>): Promise<string> {
  const authorizations = [{ team_id: "T1", user_id: SLACK_BOT_USER, is_bot: true }];
  const body = JSON.stringify({ team_id: "T1", api_app_id: "A1", type: "event_callback", event_id: `EvTrig${++slackEvent}`, event_time: Math.floor(Date.now() / 1000), authorizations, event });
  const timestamp = Math.floor(Date.now() / 1000);
  const res = await fetch(bots.slack.url, { method: "POST", headers: { "content-type": "application/json", "x-slack-request-timestamp": String(timestamp), "x-slack-signature": slackSign(timestamp, body) }, body });
  expect(res.status).toBe(200);
  await res.text();
  return `slack:${bots.slack.botId}:msg:${event.channel}:${event.ts}`;
}
let messageTs = 1_950_000_000;
const slackMessage = (channel: string, text: string, extra: Record<string, unknown> = {}) => ({ type: "message", channel, channel_type: "channel", user: "U42", text, ts: `${++messageTs}.000200`, team: "T1", ...extra });

// --- Lark ---
let larkSeq = 0;
async function larkPost(chatId: string, text: string, opts: { chatType?: string; mentions?: unknown[]; parentId?: string } = {}): Promise<string> {
  const eventId = `ev_trigger_${++larkSeq}`;
  const payload = {
    schema: "2.0",
    header: { event_id: eventId, event_type: "im.message.receive_v1", create_time: String(Date.now()), token: LARK.verification_token, app_id: LARK.app_id, tenant_key: "tenant_1" },
    event: {
      sender: { sender_id: { open_id: "ou_ada", union_id: "on_ada", user_id: null }, sender_type: "user", tenant_key: "tenant_1" },
      message: { message_id: `om_trigger_${larkSeq}`, chat_id: chatId, chat_type: opts.chatType ?? "group", message_type: "text", content: JSON.stringify({ text }), create_time: String(Date.now()), mentions: opts.mentions ?? [], ...(opts.parentId ? { parent_id: opts.parentId, root_id: opts.parentId } : {}) },
    },
  };
  const res = await fetch(bots.lark.url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(payload) });
  expect(res.status).toBe(200);
  await res.text();
  return `lark:${bots.lark.botId}:${eventId}`;
}

describe("group-chat trigger rules (trigger_policy)", () => {
  it("is validated and shown by the admin API, answering every group message unless it says otherwise", async () => {
    const agent = (await host.admin("GET", "/v1/admin/agents/triggers-telegram")).body;
    expect(agent.trigger_policy).toEqual(POLICY);
    const body = { name: "t", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: "nowhere" } };
    for (const wrong of [{ group_messages: "sometimes" }, { prefixes: [""] }, { prefixes: [" ai"] }, { mentions: true }]) {
      const res = await host.admin("POST", "/v1/admin/agents", { ...body, agent_id: "wrong-trigger", trigger_policy: wrong });
      expect([res.status, res.body.error.code]).toEqual([400, "invalid_request"]);
    }
    const plain = await host.admin("POST", "/v1/admin/agents", { ...body, agent_id: "default-trigger" });
    expect([plain.status, plain.body.trigger_policy]).toEqual([201, { group_messages: "all", prefixes: [] }]);
  });

  it("Telegram: answers a mention anywhere, a reply to the bot, a command or a prefix; records the rest, which later runs read, starting nothing", async () => {
    const chat = "-9100";
    const chatter = tgMessage(chat, "just chatting, no bot here");
    await tgPost(chatter);
    expect(await eventRow(tgEvent(chatter))).toEqual({ disposition: "unaddressed", run_id: null, agent_id: "triggers-telegram" });
    const view = (await host.admin("GET", `/v1/events/${tgEvent(chatter)}`)).body;
    expect([view.disposition, view.run_id ?? null, view.agent_id]).toEqual(["unaddressed", null, "triggers-telegram"]);
    const otherBot = tgMessage(chat, "hey @OtherBot hi", { entities: [mention("hey @OtherBot hi", "@OtherBot")] });
    await tgPost(otherBot);
    const asking = "@TriggerTestBot what was said?";
    const addressed = [
      tgMessage(chat, asking, { entities: [mention(asking, "@TriggerTestBot")] }),
      tgMessage(chat, "ask @triggertestbot later", { entities: [mention("ask @triggertestbot later", "@triggertestbot")] }),
      tgMessage(chat, "and then?", { reply_to_message: { message_id: 700, date: 1, chat: { id: -9100, type: "supergroup" }, from: { id: 123456, is_bot: true, first_name: "Trig" }, text: "re: earlier" } }),
      tgMessage(chat, "/help", { entities: [{ type: "bot_command", offset: 0, length: 5 }] }),
      tgMessage(chat, "!ai summarize"),
    ];
    for (const u of addressed) {
      await tgPost(u);
      await answered(tgEvent(u));
    }
    // A reply to someone else's message addresses no one.
    const toBob = tgMessage(chat, "agreed", { reply_to_message: { message_id: 9, date: 1, chat: { id: -9100, type: "supergroup" }, from: { id: 7, is_bot: false, first_name: "Bob" }, text: "lunch?" } });
    await tgPost(toBob);
    const direct = tgMessage("9100", "hello in private");
    await tgPost(direct);
    await answered(tgEvent(direct));
    await sleep(500);
    expect(textsIn(chat).sort()).toEqual(["!ai summarize", "/help", "and then?", "ask @triggertestbot later", "what was said?"]);
    expect(textsIn("9100")).toEqual(["hello in private"]);
    for (const u of [otherBot, toBob]) expect((await eventRow(tgEvent(u))).disposition).toBe("unaddressed");
    // The unaddressed message is the conversation's: the next run reads it.
    expect(begun.find((b) => b.text === "what was said?")!.history).toContain("just chatting, no bot here");
  });

  it("Telegram: in a forum topic the bot opened, a message replies only to the topic's opening, which addresses no one; a reply to the bot's answer there, or from another topic, does", async () => {
    const chat = "-9150";
    const topic = { message_thread_id: 77, is_topic_message: true };
    // Telegram names the service message that opened the topic as every topic message's reply: here the bot's own
    // (a support bot opening a topic per ticket with createForumTopic).
    const opening = { message_id: 77, date: 1, chat: { id: -9150, type: "supergroup", is_forum: true }, from: { id: 123456, is_bot: true, first_name: "Trig" }, ...topic, forum_topic_created: { name: "Ticket 1", icon_color: 7322096 } };
    const chatter = tgMessage(chat, "thanks everyone, looking into it", { ...topic, reply_to_message: opening });
    await tgPost(chatter);
    expect(await eventRow(tgEvent(chatter))).toEqual({ disposition: "unaddressed", run_id: null, agent_id: "triggers-telegram" });
    const answer = { message_id: 80, date: 1, chat: opening.chat, from: opening.from, ...topic, text: "re: your ticket" };
    const toBot = tgMessage(chat, "that did not work", { ...topic, reply_to_message: answer });
    await tgPost(toBot);
    await answered(tgEvent(toBot));
    // A reply from another topic to the bot's answer here: Telegram names it by external_reply, and it addresses the bot.
    const external_reply = { origin: { type: "user", date: 1, sender_user: opening.from }, chat: opening.chat, message_id: 80 };
    const fromGeneral = tgMessage(chat, "same problem here", { external_reply });
    await tgPost(fromGeneral);
    await answered(tgEvent(fromGeneral));
    await sleep(500);
    expect(textsIn(chat).sort()).toEqual(["same problem here", "that did not work"]);
  });

  it("Telegram: a message that does not address the bot never joins the run in progress; one that does is steered into it", async () => {
    const chat = "-9200";
    const first = "@TriggerTestBot hold s1";
    await tgPost(tgMessage(chat, first, { entities: [mention(first, "@TriggerTestBot")] }));
    await waitFor(() => textsIn(chat).includes("hold s1"), 15_000, "the run in progress");
    const aside = tgMessage(chat, "meanwhile, lunch?");
    await tgPost(aside);
    const more = tgMessage(chat, "@TriggerTestBot and this", { entities: [{ type: "mention", offset: 0, length: 15 }] });
    await tgPost(more);
    expect((await eventRow(tgEvent(aside))).disposition).toBe("unaddressed");
    expect((await eventRow(tgEvent(more))).disposition).toBe("steered");
    gate("s1").resolve();
    const answers = () => fake.callsTo(/\/sendMessage$/).filter((c) => String(c.body.chat_id) === chat);
    await waitFor(() => answers().length > 0, 15_000, "the answer");
    expect(answers().map((c) => c.body.text)).toEqual(["re: hold s1 + and this"]);
    expect(await runsIn(chat)).toHaveLength(1);
  });

  it("Telegram: an edit that makes a message address the bot starts nothing; the transcript takes its words", async () => {
    const chat = "-9300";
    const said = tgMessage(chat, "wrong words");
    await tgPost(said);
    const text = "@TriggerTestBot right words";
    const edited = { ...said.message, text, entities: [mention(text, "@TriggerTestBot")], edit_date: Math.floor(Date.now() / 1000) + 5 };
    await tgPost({ update_id: ++updateId, edited_message: edited });
    await waitFor(async () => (await host.query<{ content: string }>("SELECT content FROM transcript WHERE conversation_id = ? AND role = 'user'", [chat]))[0]?.content === "right words", 15_000, "the edit");
    await sleep(1_000);
    expect(await runsIn(chat)).toEqual([]);
    expect(textsIn(chat)).toEqual([]);
    expect((await eventRow(tgEvent(said))).disposition).toBe("unaddressed");
  });

  it("Telegram: an album whose caption addresses the bot is one run with every item; one whose caption does not starts nothing", async () => {
    const chat = "-9400";
    const item = (id: number, group: string, caption?: string, entities?: unknown[]) =>
      tgMessage(chat, "", { message_id: id, media_group_id: group, text: undefined, photo: [{ file_id: `photo-${id}`, width: 800, height: 800 }], ...(caption ? { caption, caption_entities: entities ?? [] } : {}) });
    const caption = "@TriggerTestBot compare these";
    const albumA = [item(401, "trig-a", caption, [mention(caption, "@TriggerTestBot")]), item(402, "trig-a")];
    const albumB = [item(411, "trig-b", "holiday pics"), item(412, "trig-b")];
    for (const u of [...albumA, ...albumB]) await tgPost(u);
    await waitFor(() => textsIn(chat).length > 0, 15_000, "the album's run");
    await sleep(2_500);
    expect(begun.filter((b) => b.conversation === chat).map((b) => [b.text, b.attachments])).toEqual([["compare these", 2]]);
    const [a1, a2, b1, b2] = await Promise.all([...albumA, ...albumB].map((u) => eventRow(tgEvent(u))));
    expect([a1.disposition, a2.disposition, a2.run_id]).toEqual(["bound", "merged", a1.run_id]);
    expect([b1, b2].map((e) => [e.disposition, e.run_id])).toEqual([["unaddressed", null], ["unaddressed", null]]);
    expect(await runsIn(chat)).toHaveLength(1);
  });

  it("Slack: answers a mention of the bot user, a reply in the bot's thread, a prefix and a DM; records the rest", async () => {
    const channel = "C9100";
    const asked = async (event: Record<string, unknown>) => {
      const id = await slackPost(event);
      await answered(id);
      return id;
    };
    const chatter = await slackPost(slackMessage(channel, "lunch anyone?"));
    const mentioned = await asked(slackMessage(channel, `hey <@${SLACK_BOT_USER}> what is for lunch`));
    const prefixed = await asked(slackMessage(channel, "!ai weather"));
    const someone = await slackPost(slackMessage(channel, "<@U77> are you in?"));
    const inBotThread = await asked(slackMessage(channel, "thanks, and dessert?", { thread_ts: SLACK_BOT_THREAD, parent_user_id: SLACK_BOT_USER }));
    const inOtherThread = await slackPost(slackMessage(channel, "me too", { thread_ts: "1950000000.000300", parent_user_id: "U42" }));
    const direct = await asked(slackMessage("D9100", "hello there", { channel_type: "im" }));
    await sleep(500);
    expect(textsIn(channel).sort()).toEqual(["!ai weather", "hey @UBOT what is for lunch", "thanks, and dessert?"]);
    expect(textsIn("D9100")).toEqual(["hello there"]);
    for (const id of [chatter, someone, inOtherThread]) expect(await eventRow(id)).toEqual({ disposition: "unaddressed", run_id: null, agent_id: "triggers-slack" });
    for (const id of [mentioned, prefixed, inBotThread, direct]) expect((await eventRow(id)).disposition).toBe("bound");
    expect(begun.find((b) => b.text === "!ai weather")!.history).toEqual(expect.arrayContaining(["lunch anyone?"]));
    // A reply in a thread carries the thread's parent (the bot's own words, read from Slack); one recorded unanswered
    // has it not read: Slack says whose thread it is without it, and nothing will answer it.
    const replyTo = async (id: string) => JSON.parse((await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE event_id = ?", [id]))[0].data_json).reply_to;
    expect(await replyTo(inBotThread)).toEqual({ message_id: SLACK_BOT_THREAD, actor: { actor_type: "bot", actor_id: SLACK_BOT_USER, actor_name: null }, text: "Lunch today: soup", quote: null, attachments: [], unavailable: null });
    expect(await replyTo(inOtherThread)).toMatchObject({ message_id: "1950000000.000300", text: null, unavailable: "it does not address the bot, and its agent answers only what does" });
    expect(fake.callsTo(/^\/conversations\.replies$/).map((c) => new URLSearchParams(c.raw).get("ts"))).toEqual([SLACK_BOT_THREAD]);
    expect(await replyTo(chatter)).toBeNull();
    // Not a bot left unbound: nothing to explain on its view.
    expect((await host.admin("GET", `/v1/admin/bots/${bots.slack.botId}`)).body.last_unbound_event).toBeUndefined();
  });

  it("Slack: a thread_broadcast (no parent_user_id) in the bot's thread addresses it, told by its root's poster: the bot user, or the bot's app; one in another's thread does not", async () => {
    const channel = "C9150";
    const root = (poster: Record<string, unknown>, ts: string) => ({ type: "message", text: "Lunch today: soup", ts, thread_ts: ts, reply_count: 1, ...poster });
    const broadcast = (text: string, poster: Record<string, unknown>, ts: string) => slackMessage(channel, text, { subtype: "thread_broadcast", thread_ts: ts, root: root(poster, ts) });
    const byUser = await slackPost(broadcast("soup again?", { user: SLACK_BOT_USER, bot_id: "B0BOT" }, SLACK_BOT_THREAD));
    const byApp = await slackPost(broadcast("and bread?", { subtype: "bot_message", bot_id: "B0BOT", bot_profile: { app_id: "A1" } }, "1950000000.000200"));
    const byOther = await slackPost(broadcast("me too", { user: "U42" }, "1950000000.000300"));
    for (const id of [byUser, byApp]) await answered(id);
    await sleep(500);
    expect(textsIn(channel).sort()).toEqual(["and bread?", "soup again?"]);
    expect(await eventRow(byOther)).toEqual({ disposition: "unaddressed", run_id: null, agent_id: "triggers-slack" });
  });

  it("Lark: answers a mention of the bot and a private chat; records a group message mentioning no one, or someone else", async () => {
    const chat = "oc_trigger_group";
    const chatter = await larkPost(chat, "random chatter");
    const others = await larkPost(chat, "@_user_1 look at this", { mentions: [{ key: "@_user_1", id: { open_id: "ou_ada" }, name: "Ada" }] });
    const ours = await larkPost(chat, "@_user_1 what is up", { mentions: [{ key: "@_user_1", id: { open_id: LARK_OPEN_ID }, name: "Trig" }] });
    const direct = await larkPost("oc_trigger_p2p", "hi", { chatType: "p2p" });
    await waitFor(() => textsIn(chat).length >= 1 && textsIn("oc_trigger_p2p").length >= 1, 15_000, "the addressed messages' runs");
    await sleep(500);
    expect(textsIn(chat)).toEqual(["what is up"]);
    expect(begun.find((b) => b.text === "what is up")!.history).toEqual(["random chatter", "@Ada look at this"]);
    for (const id of [chatter, others]) expect(await eventRow(id)).toEqual({ disposition: "unaddressed", run_id: null, agent_id: "triggers-lark" });
    for (const id of [ours, direct]) expect((await eventRow(id)).disposition).toBe("bound");
  });

  it("Lark: a reply to the bot's message addresses it, known from the replied message's sender (read by its parent_id); a reply to someone else's does not", async () => {
    const chat = "oc_trigger_replies";
    const said = (id: string, sender: Record<string, unknown>, text: string) =>
      larkMessages.set(id, { message_id: id, msg_type: "text", chat_id: chat, deleted: false, sender: { tenant_key: "tenant_1", ...sender }, body: { content: JSON.stringify({ text }) } });
    // The bot's own message, as the API names an app's: by its app_id.
    said("om_trigger_bots", { id: LARK.app_id, id_type: "app_id", sender_type: "app" }, "the answer was 42");
    said("om_trigger_bobs", { id: "ou_bob", id_type: "open_id", sender_type: "user" }, "lunch?");
    const toBot = await larkPost(chat, "why 42?", { parentId: "om_trigger_bots" });
    expect((await eventRow(toBot)).disposition).toBe("bound");
    await answered(toBot);
    const toBob = await larkPost(chat, "agreed", { parentId: "om_trigger_bobs" });
    expect(await eventRow(toBob)).toEqual({ disposition: "unaddressed", run_id: null, agent_id: "triggers-lark" });
    await sleep(500);
    expect(textsIn(chat)).toEqual(["why 42?"]);
  });
});
