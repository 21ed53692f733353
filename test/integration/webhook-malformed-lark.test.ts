/**
 * Lark events carrying the bot's verification token but not the shape Lark documents: each is answered 200 (Lark
 * retries anything else for hours) and recorded with its payload for the operator, or refused with a clear 4xx when
 * it cannot be read at all; never a 500, never an unhandled error in the Worker's log.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { startChatRunner, startFakePlatform, waitFor, type PlatformCall } from "../support/fake-platform";
import { deliver, expectEachHandled, expectHandled, expectRecorded, nestedJson, type MalformedRow } from "../support/malformed-webhooks";

const APP_SECRET = "malformed-lark-app-secret-0123";
const VERIFICATION_TOKEN = "malformed-lark-verification-token";
const SECRETS = [APP_SECRET, VERIFICATION_TOKEN];

let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startChatRunner>>;
let bot: { botId: string; url: string };
let sent = 0;

/** Lark's API as far as these events reach it: a token, the bot's own open_id, messages sent; any message read is not found. */
function larkApi(call: PlatformCall) {
  if (call.path.endsWith("/tenant_access_token/internal")) return { json: { code: 0, tenant_access_token: "t-malformed", expire: 7200 } };
  if (call.path === "/open-apis/bot/v3/info") return { json: { code: 0, bot: { open_id: "ou_bot" } } };
  if (call.method === "GET") return { status: 400, json: { code: 230002, msg: "message not found" } };
  return { json: { code: 0, data: { message_id: `om_sent_${++sent}` } } };
}

beforeAll(async () => {
  fake = await startFakePlatform(larkApi);
  runner = await startChatRunner("malformed-lark");
  host = await startTestHost({ captureLogs: true });
  const created = await host.admin("POST", "/v1/admin/bots", { platform: "lark", api_base_url: fake.url, credentials: { app_id: "cli_malformed", app_secret: APP_SECRET, verification_token: VERIFICATION_TOKEN } });
  expect(created.status).toBe(201);
  bot = { botId: created.body.bot_id, url: created.body.webhook_url };
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "malformed-lark-agent", scope: { type: "bot", id: bot.botId }, eventTypes: ["message.received", "message.recalled", "group.member_joined"] });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

const post = (body: string) => () => fetch(bot.url, { method: "POST", headers: { "content-type": "application/json" }, body });

let n = 0;
/** A v2 event of `type` around `event`, with the bot's verification token. */
const larkEvent = (type: string, event: unknown, header: Record<string, unknown> = {}) =>
  JSON.stringify({ schema: "2.0", header: { event_id: `ev-malformed-${++n}`, event_type: type, create_time: String(Date.now()), token: VERIFICATION_TOKEN, app_id: "cli_malformed", tenant_key: "tk", ...header }, event });
/** Ada's text "hi" in a p2p chat, but for the message fields given. */
const message = (fields: Record<string, unknown>, sender: unknown = { sender_id: { open_id: "ou_ada" }, sender_type: "user" }) =>
  larkEvent("im.message.receive_v1", { sender, message: { message_id: `om_mal_${++n}`, chat_id: "oc_malformed", chat_type: "p2p", message_type: "text", content: JSON.stringify({ text: "hi" }), ...fields } });

/** The payload as stored: the verification token (and a card's update token) left out. */
function withoutTokens(body: string): unknown {
  const payload = JSON.parse(body);
  delete payload.token;
  delete payload.header?.token;
  if (payload.event && typeof payload.event === "object") delete payload.event.token;
  return payload;
}

const rows: MalformedRow[] = [
  { name: "the token alone", body: () => JSON.stringify({ token: VERIFICATION_TOKEN }) },
  { name: "header a string", body: () => JSON.stringify({ token: VERIFICATION_TOKEN, header: "x" }) },
  { name: "event_id a number", body: () => larkEvent("im.message.receive_v1", {}, { event_id: 5 }) },
  { name: "create_time a number", body: () => larkEvent("im.chat.updated_v1", { chat_id: "oc_malformed" }, { create_time: 5 }) },
  { name: "event null", body: () => larkEvent("im.message.receive_v1", null) },
  { name: "a text message whose content is JSON null", body: () => message({ content: "null" }), as: ["platform.unhandled", "im.message.receive_v1"] },
  { name: "an image message whose content is JSON null", body: () => message({ message_type: "image", content: "null" }), as: ["platform.unhandled", "im.message.receive_v1"] },
  { name: "a post whose content is JSON null", body: () => message({ message_type: "post", content: "null" }), as: ["platform.unhandled", "im.message.receive_v1"] },
  { name: "a post with null paragraphs and elements", body: () => message({ message_type: "post", content: JSON.stringify({ content: [null, [null, 5, { tag: "text", text: "still read" }], "x"] }) }), as: ["message.received", "im.message.receive_v1"] },
  { name: "content that is not JSON", body: () => message({ content: "{nope" }) },
  { name: "content an object, not a string", body: () => message({ content: { text: "hi" } }) },
  { name: "a location whose content nests 50,000 levels deep", body: () => message({ message_type: "location", content: `{"latitude":"1","longitude":"2","x":${nestedJson(50_000)}}` }) },
  { name: "text with a lone surrogate, a NUL and an RTL override", body: () => message({ content: JSON.stringify({ text: "\ud800\u0000\u202e words" }) }), as: ["message.received", "im.message.receive_v1"] },
  { name: "text of 600,000 characters", body: () => message({ content: JSON.stringify({ text: "w".repeat(600_000) }) }) },
  { name: "mentions of the wrong shape", body: () => message({ mentions: [null, { key: 5 }] }) },
  { name: "sender null", body: () => message({}, null) },
  { name: "chat_id a number", body: () => message({ chat_id: 5 }) },
  { name: "a chat_id with a lone surrogate", body: () => message({ chat_id: "oc_\ud800" }), as: ["platform.unhandled", "im.message.receive_v1.unusable_id"] },
  { name: "a thread_id with a NUL", body: () => message({ thread_id: "omt_\u0000" }), as: ["platform.unhandled", "im.message.receive_v1.unusable_id"] },
  { name: "a reply whose parent_id has a lone surrogate", body: () => message({ parent_id: "om_\ud800" }), as: ["message.received", "im.message.receive_v1"] },
  { name: "an image in a message whose id has a lone surrogate", body: () => message({ message_id: "om_\udc00", message_type: "image", content: JSON.stringify({ image_key: "img_1" }) }), as: ["message.received", "im.message.receive_v1"] },
  { name: "a recall of the wrong types", body: () => larkEvent("im.message.recalled_v1", { message_id: 5, chat_id: null }) },
  { name: "members added holding null", body: () => larkEvent("im.chat.member.user.added_v1", { chat_id: "oc_malformed", users: [null, { user_id: null }] }) },
  { name: "a card press with no action", body: () => larkEvent("card.action.trigger", { operator: "x", action: null, token: "c-card-token" }) },
  { name: "an event nested 50,000 levels deep", body: () => larkEvent("x.y", { d: "@@" }).replace('"@@"', nestedJson(50_000)), refused: { status: 400, code: "invalid_json" } },
  // The token is inside the body: one that cannot be read proves nothing.
  { name: "a body cut short", body: () => message({}).slice(0, 40), refused: { status: 401, code: "unauthorized" } },
];

describe("Lark: an event with the verification token, of the wrong shape", () => {
  it("is acknowledged 200 and recorded with its payload, or refused when it cannot be read; never a 500", async () => {
    await expectEachHandled(host, bot.botId, rows, { send: (body) => post(body), secrets: SECRETS, stored: (body) => withoutTokens(body) });
  });

  it("a post's words survive the elements it cannot read; a reply whose parent cannot be named still runs", async () => {
    const post1 = await deliver(host, bot.botId, post(message({ message_type: "post", content: JSON.stringify({ title: "T", content: [[null, { tag: "text", text: "kept words" }], null] }) })));
    expectHandled(post1, SECRETS);
    await expect.poll(() => runner.contexts.find((c) => c.input.text === "T\nkept words")).toBeTruthy();
    const reply = await deliver(host, bot.botId, post(message({ parent_id: "om_\ud800", content: JSON.stringify({ text: "about that" }) })));
    expectHandled(reply, SECRETS);
    await expect.poll(() => runner.contexts.find((c) => c.input.text === "about that")).toBeTruthy();
  });

  it("an empty thread_id, root_id and parent_id say the message has none: it runs, and is answered in the chat, not in a new thread", async () => {
    const d = await deliver(host, bot.botId, post(message({ message_id: "om_empty_ids", thread_id: "", root_id: "", parent_id: "", content: JSON.stringify({ text: "no thread here" }) })));
    expectHandled(d, SECRETS);
    const recorded = await expectRecorded(host, d);
    expect([recorded.event_type, recorded.source_event_type, recorded.conversation_id]).toEqual(["message.received", "im.message.receive_v1", "oc_malformed"]);
    const [row] = await host.query<{ thread_id: string | null }>("SELECT thread_id FROM event_log WHERE event_id = ?", [recorded.event_id]);
    expect(row.thread_id).toBeNull();
    await expect.poll(() => runner.contexts.find((c) => c.input.text === "no thread here")).toBeTruthy();
    const answer = await waitFor(() => fake.calls.find((c) => c.path === "/open-apis/im/v1/messages/om_empty_ids/reply"), 10_000, "the answer");
    expect(answer.body.reply_in_thread).toBe(false);
  });

  it("a card press whose open_chat_id is empty is a press outside any chat, recorded under Lark's own name", async () => {
    const press = { operator: { open_id: "ou_ada" }, action: { tag: "button", value: "v" }, context: { open_message_id: "om_card", open_chat_id: "" } };
    const d = await deliver(host, bot.botId, post(larkEvent("card.action.trigger", press)));
    expectHandled(d, SECRETS);
    const recorded = await expectRecorded(host, d);
    expect([recorded.event_type, recorded.source_event_type, recorded.conversation_id]).toEqual(["platform.unhandled", "card.action.trigger", null]);
  });
});
