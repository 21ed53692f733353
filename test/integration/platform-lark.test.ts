import { createCipheriv, createHash, randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { settledRefusals } from "../support/settled-refusals";
import { ANSWER_FILE, fileOf, formOf, gapsBetween, startChatRunner, startFakePlatform, waitFor, type FakeReply, type PlatformCall } from "../support/fake-platform";
import { larkMessageProblem } from "../support/lark-markdown";
import { callHostApi, deferred } from "../support/host-api";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { putAgent } from "../support/scripted-runner";
import { TABLE_ANSWER, TABLE_ANSWER_LARK } from "../support/markdown-sample";

const APP_ID = "cli_test_app_0001";
const APP_SECRET = "lark-app-secret-0123456789abcdef";
const VERIFICATION_TOKEN = "lark-verification-token-abcdef";
const ENCRYPT_KEY = "lark-encrypt-key-0123456789";
const TENANT_TOKEN = "t-tenant-access-token-xyz0123456789";
/** The bot's own open_id, as bot/v3/info names it. */
const OUR_OPEN_ID = "ou_our_bot";
const IMAGE = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 1, 2, 3]);
/** Messages whose first reply the fake refuses as rate limited, with x-ogw-ratelimit-reset: 1: the app's limit (429, 99991400) or the chat's (400, 230020). */
const throttledMessages = new Map<string, { status: number; code: number }>();
/** The next image upload loses its connection before an answer; so does the first file post replying to these messages (posted all the same). */
let cutNextImageUpload = false;
const cutFilePosts = new Set<string>();
/** Lark keeps a message's uuid for an hour: a repeat of it is not posted again, and answers the first message. */
const postedUuids = new Map<string, string>();
/** Each card's schema, by message id: a patch cannot change it. */
const cardSchemas = new Map<string, string>();
/** Messages whose replies (and those replies' patches) Lark refuses any Markdown card for, as for a converter bug. */
const refusingMarkdown = new Set<string>();
/** Messages their users recalled: Lark refuses a reply to them (400, 230011). */
const recalledMessages = new Set<string>();
/** Messages whose replies Lark refuses for where they are: deleted (230110), or in a chat the bot was removed from (230002). */
const refusedReplies = new Map<string, { code: number; msg: string }>();
/** Messages the API gives by id (GET im/v1/messages/{id}), as Lark answers them: any other is refused for want of permission. */
const readableMessages = new Map<string, Record<string, unknown>>();
/** Words the tenant's content check (DLP) refuses in any message the bot posts or patches (400, 230028). */
const DLP_WORD = "dlpblocked";
const DLP_REFUSAL: FakeReply = { status: 400, json: { code: 230028, msg: "The messages do NOT pass the audit, ext=dlp" } };
/** Resource downloads (by file key) the fake answers only once the test lets them. */
const heldResources = new Map<string, ReturnType<typeof deferred<void>>>();
/** A message whose read answers only after 2.5 s. */
const SLOW_PARENT = "om_parent_slow";
const PDF = new Uint8Array([0x25, 0x50, 0x44, 0x46, 0x2d, 1, 2]);

let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startChatRunner>>;
/** Two bots of one app: one with plain bodies, one with an encrypt key. */
const plain = { botId: "", url: "" };
const encrypted = { botId: "", url: "" };
let replyCount = 0;
const answered: string[] = [];

/** As Lark does: content it cannot build is refused (400, 230099), and nothing is posted or changed. */
function refusedContent(call: PlatformCall, msgType: string, refusing: boolean, messageId?: string): FakeReply | null {
  const refusal = (why: string): FakeReply => ({ status: 400, json: { code: 230099, msg: `Failed to create card content, ext=ErrCode: 200621; ErrMsg: ${why};` } });
  const { problem, schema } = larkMessageProblem(msgType, String(call.body?.content));
  if (problem) return refusal(problem);
  if (refusing && schema === "2.0" && JSON.parse(call.body.content).body.elements[0].tag === "markdown") return refusal("markdown refused");
  if (messageId !== undefined && cardSchemas.get(messageId) !== schema) return refusal(`a card ${cardSchemas.get(messageId)} patched as ${schema}`);
  return null;
}

function larkApi(call: PlatformCall): FakeReply {
  if (call.path === "/open-apis/auth/v3/tenant_access_token/internal") {
    if (call.body?.app_id !== APP_ID || call.body?.app_secret !== APP_SECRET) return { json: { code: 10014, msg: "app secret invalid" } };
    return { json: { code: 0, msg: "ok", tenant_access_token: TENANT_TOKEN, expire: 7200 } };
  }
  if (call.headers.authorization !== `Bearer ${TENANT_TOKEN}`) return { status: 400, json: { code: 99991663, msg: "Invalid access token" } };
  // The bot's own profile: answered in `bot`, not `data`.
  if (call.path === "/open-apis/bot/v3/info" && call.method === "GET") return { json: { code: 0, msg: "ok", bot: { activate_status: 2, app_name: "Our Bot", open_id: OUR_OPEN_ID } } };
  const reply = /^\/open-apis\/im\/v1\/messages\/([^/]+)\/reply$/.exec(call.path);
  if (reply && call.method === "POST") {
    if (recalledMessages.has(reply[1])) return { status: 400, json: { code: 230011, msg: "The message is recalled." } };
    if (String(call.body?.content).includes(DLP_WORD)) return DLP_REFUSAL;
    const refusedReply = refusedReplies.get(reply[1]);
    if (refusedReply) return { status: 400, json: refusedReply };
    const throttled = throttledMessages.get(reply[1]);
    if (throttled && throttledMessages.delete(reply[1])) return { status: throttled.status, headers: { "x-ogw-ratelimit-reset": "1" }, json: { code: throttled.code, msg: "request trigger frequency limit" } };
    const refused = refusedContent(call, call.body.msg_type, refusingMarkdown.has(reply[1]));
    if (refused) return refused;
    const repeat = postedUuids.get(call.body.uuid);
    if (repeat) return { json: { code: 0, msg: "success", data: { message_id: repeat } } };
    const messageId = `om_reply_${++replyCount}`;
    postedUuids.set(call.body.uuid, messageId);
    if (call.body.msg_type === "interactive") cardSchemas.set(messageId, larkMessageProblem("interactive", call.body.content).schema!);
    if (refusingMarkdown.has(reply[1])) refusingMarkdown.add(messageId);
    if (call.body.msg_type === "file" && cutFilePosts.delete(reply[1])) return { drop: true };
    return { json: { code: 0, msg: "success", data: { message_id: messageId } } };
  }
  if (call.path === "/open-apis/im/v1/messages" && call.method === "POST" && call.query.get("receive_id_type") === "chat_id") {
    return refusedContent(call, call.body.msg_type, false) ?? { json: { code: 0, msg: "success", data: { message_id: `om_new_${++replyCount}` } } };
  }
  if (call.path === "/open-apis/im/v1/images" && call.method === "POST" && cutNextImageUpload) {
    cutNextImageUpload = false;
    return { drop: true };
  }
  // An image Lark will not take as one (a full-page screenshot past its pixel limits): refused, as it refuses what it cannot show.
  if (call.path === "/open-apis/im/v1/images" && call.method === "POST" && call.raw.includes('filename="tall.png"')) return { status: 400, json: { code: 234011, msg: "Can't regonnize the image format." } };
  if (call.path === "/open-apis/im/v1/images" && call.method === "POST") return { json: { code: 0, msg: "success", data: { image_key: `img_up_${++replyCount}` } } };
  if (call.path === "/open-apis/im/v1/files" && call.method === "POST") return { json: { code: 0, msg: "success", data: { file_key: `file_up_${++replyCount}` } } };
  const read = /^\/open-apis\/im\/v1\/messages\/([^/]+)$/.exec(call.path);
  if (read && call.method === "GET") {
    const message = readableMessages.get(read[1]);
    return message ? { json: { code: 0, msg: "success", data: { items: [message] } } } : { status: 400, json: { code: 230027, msg: "Lack of necessary permissions" } };
  }
  if (call.path === "/open-apis/im/v1/messages/om_bobs_pdf/resources/file_v2_q3" && call.query.get("type") === "file") return { bytes: PDF, headers: { "content-type": "application/pdf" } };
  const patched = /^\/open-apis\/im\/v1\/messages\/([^/]+)$/.exec(call.path);
  if (patched && call.method === "PATCH" && String(call.body?.content).includes(DLP_WORD)) return DLP_REFUSAL;
  if (patched && call.method === "PATCH") return refusedContent(call, "interactive", refusingMarkdown.has(patched[1]), patched[1]) ?? { json: { code: 0, msg: "success", data: {} } };
  if (/^\/open-apis\/im\/v1\/messages\/[^/]+\/resources\/img_1$/.test(call.path)) return { bytes: IMAGE, headers: { "content-type": "image/png" } };
  return { status: 404, json: { code: 404, msg: "not found" } };
}

/**
 * Another app whose Open API is slow: its tenant token and its bot's info each answer after 900 ms (inside the host's
 * 1 s bound for each), its image after 2.5 s. A message mentioning someone waits for both before it is even read.
 */
const SLOW_APP_ID = "cli_slow_app_0002";
const SLOW_TENANT_TOKEN = "t-slow-tenant-access-token-0123";
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function slowLarkApi(call: PlatformCall): Promise<FakeReply | null> {
  if (call.path === "/open-apis/auth/v3/tenant_access_token/internal" && call.body?.app_id === SLOW_APP_ID) {
    await pause(900);
    return { json: { code: 0, msg: "ok", tenant_access_token: SLOW_TENANT_TOKEN, expire: 7200 } };
  }
  if (call.headers.authorization !== `Bearer ${SLOW_TENANT_TOKEN}`) return null;
  if (call.path === "/open-apis/bot/v3/info") {
    await pause(900);
    return { json: { code: 0, msg: "ok", bot: { activate_status: 2, app_name: "Slow Bot", open_id: "ou_slow_bot" } } };
  }
  await pause(2_500);
  return { bytes: IMAGE, headers: { "content-type": "image/png" } };
}

beforeAll(async () => {
  fake = await startFakePlatform(async (call) => {
    const held = heldResources.get(call.path.split("/resources/")[1] ?? "");
    if (held) return held.promise.then(() => ({ bytes: IMAGE, headers: { "content-type": "image/png" } }));
    if (call.path === `/open-apis/im/v1/messages/${SLOW_PARENT}`) await pause(2_500);
    return (await slowLarkApi(call)) ?? larkApi(call);
  });
  runner = await startChatRunner("lark-chat");
  host = await startTestHost({ captureLogs: true });
  for (const [bot, extra] of [[plain, {}], [encrypted, { encrypt_key: ENCRYPT_KEY }]] as const) {
    const created = await host.admin("POST", "/v1/admin/bots", { platform: "lark", api_base_url: fake.url, credentials: { app_id: APP_ID, app_secret: APP_SECRET, verification_token: VERIFICATION_TOKEN, ...extra } });
    expect(created.status).toBe(201);
    answered.push(JSON.stringify(created.body));
    bot.botId = created.body.bot_id;
    bot.url = created.body.webhook_url;
    await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: `lark-${bot === plain ? "plain" : "enc"}`, scope: { type: "bot", id: bot.botId } });
  }
  // The encrypted bot's agent does not stream: its replies are plain text messages, sent once complete.
  const agent = await host.admin("GET", "/v1/admin/agents/lark-enc");
  const { agent_id: _id, created_at: _c, updated_at: _u, ...input } = agent.body;
  expect((await host.admin("PUT", "/v1/admin/agents/lark-enc", { ...input, delivery_policy: { streaming: false } })).status).toBe(200);
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

/** Lark's encrypted body: AES-256-CBC, key SHA-256(encrypt key), a random IV prefixed, base64. */
function encrypt(payload: unknown, key = ENCRYPT_KEY): string {
  const iv = randomBytes(16);
  const cipher = createCipheriv("aes-256-cbc", createHash("sha256").update(key).digest(), iv);
  return JSON.stringify({ encrypt: Buffer.concat([iv, cipher.update(JSON.stringify(payload), "utf8"), cipher.final()]).toString("base64") });
}
const signature = (timestamp: string, nonce: string, body: string, key = ENCRYPT_KEY) => createHash("sha256").update(timestamp + nonce + key + body).digest("hex");

async function postRaw(url: string, body: string, headers: Record<string, string> = {}) {
  const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });
  const text = await res.text();
  answered.push(text);
  return { status: res.status, text };
}
const postPlain = (payload: unknown) => postRaw(plain.url, JSON.stringify(payload));
async function postEncrypted(payload: unknown, opts: { signed?: boolean; key?: string } = {}) {
  const body = encrypt(payload, opts.key);
  const timestamp = String(Math.floor(Date.now() / 1000));
  const nonce = randomBytes(8).toString("hex");
  const headers: Record<string, string> = opts.signed === false ? {} : { "x-lark-request-timestamp": timestamp, "x-lark-request-nonce": nonce, "x-lark-signature": signature(timestamp, nonce, body, opts.key) };
  return postRaw(encrypted.url, body, headers);
}

let seq = 0;
function event<E extends Record<string, unknown>>(type: string, ev: E, eventId = `ev_${++seq}_test`) {
  return { schema: "2.0", header: { event_id: eventId, event_type: type, create_time: String(Date.now()), token: VERIFICATION_TOKEN, app_id: APP_ID, tenant_key: "tenant_1" }, event: ev };
}
function received(chatId: string, content: Record<string, unknown>, extra: Record<string, unknown> = {}, messageType = "text") {
  return event("im.message.receive_v1", {
    sender: { sender_id: { open_id: "ou_user_1", union_id: "on_1", user_id: null }, sender_type: "user", tenant_key: "tenant_1" },
    message: { message_id: `om_${++seq}`, chat_id: chatId, chat_type: "group", message_type: messageType, content: JSON.stringify(content), create_time: String(Date.now()), ...extra },
  });
}

const repliesTo = (messageId: string) => fake.calls.filter((c) => c.path === `/open-apis/im/v1/messages/${messageId}/reply`);
const patchesOf = (messageId: string) => fake.calls.filter((c) => c.method === "PATCH" && c.path === `/open-apis/im/v1/messages/${messageId}`);
/** The HTTP status the fake answered a call with. */
const statusOf = (call: PlatformCall) => call.reply?.status ?? 200;
const contextFor = (text: string) => runner.contexts.filter((c) => c.input.text === text);
/** What a card shows: its markdown element's content (card 2.0), or its plain_text (1.0, or 2.0 as it is). */
function cardText(content: string): string {
  const card = JSON.parse(content);
  const [element] = card.schema === "2.0" ? card.body.elements : card.elements;
  return element.tag === "markdown" ? element.content : element.text.content;
}

describe("Lark/Feishu: event subscription in, Open API out", () => {
  it("answers the URL challenge at once, plain or encrypted, and refuses a wrong token", async () => {
    const started = Date.now();
    const res = await postPlain({ challenge: "ch-plain", token: VERIFICATION_TOKEN, type: "url_verification" });
    expect(Date.now() - started).toBeLessThan(1000);
    expect(res.status).toBe(200);
    expect(JSON.parse(res.text)).toEqual({ challenge: "ch-plain" });
    const enc = await postEncrypted({ challenge: "ch-enc", token: VERIFICATION_TOKEN, type: "url_verification" }, { signed: false });
    expect(JSON.parse(enc.text)).toEqual({ challenge: "ch-enc" });
    expect((await postPlain({ challenge: "ch", token: "wrong-token", type: "url_verification" })).status).toBe(401);
  });

  it("runs a plain message and replies to it with the tenant token", async () => {
    const ev = received("oc_100", { text: "hello lark" });
    const res = await postPlain(ev);
    expect(res.status).toBe(200);
    const messageId = ev.event.message.message_id;
    const [reply] = await waitFor(() => repliesTo(messageId).length > 0 && repliesTo(messageId));
    expect(reply.headers.authorization).toBe(`Bearer ${TENANT_TOKEN}`);
    expect(reply.body).toMatchObject({ msg_type: "text", content: JSON.stringify({ text: "echo: hello lark" }), reply_in_thread: false });
    const [ctx] = contextFor("hello lark");
    expect(ctx.event).toMatchObject({ event_id: `lark:${plain.botId}:${ev.header.event_id}`, source: "lark", source_event_type: "im.message.receive_v1" });
    expect(ctx.conversation).toMatchObject({ conversation_id: "oc_100", thread_id: null, sender_id: "ou_user_1" });
    expect(ctx.delivery).toMatchObject({ surface: "lark", reply_target: { chat_id: "oc_100", reply_to_message_id: messageId, reply_in_thread: false }, supports_edit: true, max_message_size: 9000 });
    const raw = JSON.parse(new TextDecoder().decode((await host.r2Object(ctx.event.raw_ref))!));
    expect(raw.header.token).toBeUndefined();
  });

  it("shows the runner mentioned users by name where a text message has placeholders, keeping the mentions in the event", async () => {
    const mentions = [
      { key: "@_user_1", id: { open_id: "ou_bot" }, name: "Helper Bot", tenant_key: "tenant_1" },
      { key: "@_user_10", id: { open_id: "ou_ada" }, name: "Ada", tenant_key: "tenant_1" },
    ];
    const ev = received("oc_mentions", { text: "@_user_1 ask @_user_10 and @_user_2 about it" }, { mentions });
    expect((await postPlain(ev)).status).toBe(200);
    const [ctx] = await waitFor(() => contextFor("@Helper Bot ask @Ada and @_user_2 about it").length > 0 && contextFor("@Helper Bot ask @Ada and @_user_2 about it"));
    expect(ctx.event.data.mentions).toEqual(mentions);
  });

  it("names an @all mention the way Lark's mentions list names it, like any other mention placeholder", async () => {
    const mentions = [
      { key: "@_all", id: { open_id: "all", user_id: "all" }, name: "所有人", tenant_key: "tenant_1" },
      { key: "@_user_1", id: { open_id: "ou_ada" }, name: "Ada", tenant_key: "tenant_1" },
    ];
    const ev = received("oc_mention_all", { text: "@_all standup moved, ask @_user_1" }, { mentions });
    expect((await postPlain(ev)).status).toBe(200);
    const ctx = await waitFor(() => runner.contexts.find((c) => c.conversation.conversation_id === "oc_mention_all"), 15_000, "the run");
    expect(ctx.input.text).toBe("@所有人 standup moved, ask @Ada");
  });

  it("names a rich-text message's mentions too: from the mentions list where the element gives no name", async () => {
    // A received post's `at` element can come with an empty user_name (as in Lark's own example): the name is in `mentions`.
    const mentions = [
      { key: "@_user_1", id: { open_id: "ou_bot" }, name: "Helper Bot", tenant_key: "tenant_1" },
      { key: "@_user_2", id: { open_id: "ou_ada" }, name: "Ada", tenant_key: "tenant_1" },
    ];
    const post = { title: "", content: [[{ tag: "at", user_id: "@_user_1", user_name: "", style: [] }, { tag: "text", text: " ask " }, { tag: "at", user_id: "@_user_2", user_name: "Ada" }, { tag: "text", text: " and " }, { tag: "at", user_id: "@_user_3", user_name: "" }]] };
    const ev = received("oc_post_mentions", post, { mentions }, "post");
    expect((await postPlain(ev)).status).toBe(200);
    const ctx = await waitFor(() => runner.contexts.find((c) => c.conversation.conversation_id === "oc_post_mentions"), 15_000, "the run");
    // One nobody named keeps its placeholder, as in a text message.
    expect(ctx.input.text).toBe("@Helper Bot ask @Ada and @_user_3");
  });

  it("leaves its own leading mention out of the text, in a text message and a post; a bare ping and a mention later stay; raw_text keeps the placeholders", async () => {
    const mentions = [
      { key: "@_user_1", id: { open_id: OUR_OPEN_ID, user_id: "" }, name: "Our Bot", tenant_key: "tenant_1" },
      { key: "@_user_2", id: { open_id: "ou_ada" }, name: "Ada", tenant_key: "tenant_1" },
    ];
    const text = received("oc_addressed", { text: "@_user_1 ask @_user_2, then @_user_1" }, { mentions });
    expect((await postPlain(text)).status).toBe(200);
    const [ctx] = await waitFor(() => contextFor("ask @Ada, then @Our Bot").length > 0 && contextFor("ask @Ada, then @Our Bot"), 15_000, "the text message's run");
    expect(ctx.event.data).toMatchObject({ raw_text: "@_user_1 ask @_user_2, then @_user_1", mentions });
    const post = { title: "", content: [[{ tag: "at", user_id: "@_user_1", user_name: "" }, { tag: "text", text: ": summarize this for " }, { tag: "at", user_id: "@_user_2", user_name: "Ada" }]] };
    expect((await postPlain(received("oc_addressed_post", post, { mentions }, "post"))).status).toBe(200);
    await waitFor(() => contextFor("summarize this for @Ada").length > 0, 15_000, "the post's run");
    expect((await postPlain(received("oc_addressed_ping", { text: "@_user_1" }, { mentions }))).status).toBe(200);
    const ping = await waitFor(() => runner.contexts.find((c) => c.conversation.conversation_id === "oc_addressed_ping"), 15_000, "the ping's run");
    expect(ping.input.text).toBe("@Our Bot");
  });

  it("leaves out each of its own mentions among those a message starts with, whoever is named first; nothing after them, the text is as sent", async () => {
    // Each mention has its placeholder, the bot's second one too.
    const mentions = [
      { key: "@_user_1", id: { open_id: "ou_ada" }, name: "Ada", tenant_key: "tenant_1" },
      { key: "@_user_2", id: { open_id: OUR_OPEN_ID }, name: "Our Bot", tenant_key: "tenant_1" },
      { key: "@_user_3", id: { open_id: OUR_OPEN_ID }, name: "Our Bot", tenant_key: "tenant_1" },
    ];
    const sent = {
      oc_lead_twice: received("oc_lead_twice", { text: "@_user_2 @_user_3 named twice" }, { mentions }),
      oc_lead_second: received("oc_lead_second", { text: "@_user_1, @_user_2: named second" }, { mentions }),
      oc_lead_post: received("oc_lead_post", { title: "", content: [[{ tag: "at", user_id: "@_user_1", user_name: "Ada" }, { tag: "text", text: " " }, { tag: "at", user_id: "@_user_2", user_name: "Our Bot" }, { tag: "text", text: ", in a post" }]] }, { mentions }, "post"),
      oc_lead_only: received("oc_lead_only", { text: "@_user_1 @_user_2" }, { mentions }),
    };
    for (const ev of Object.values(sent)) expect((await postPlain(ev)).status).toBe(200);
    const words = { oc_lead_twice: "named twice", oc_lead_second: "@Ada, named second", oc_lead_post: "@Ada in a post", oc_lead_only: "@Ada @Our Bot" };
    for (const [chat, text] of Object.entries(words)) {
      const ctx = await waitFor(() => runner.contexts.find((c) => c.conversation.conversation_id === chat), 15_000, `the run in ${chat}`);
      expect(ctx.input.text).toBe(text);
    }
  });

  it("decrypts a signed encrypted event and replies in its topic thread", async () => {
    const ev = received("oc_200", { text: "secret hello" }, { thread_id: "omt_thread_1" });
    expect((await postEncrypted(ev)).status).toBe(200);
    const [reply] = await waitFor(() => repliesTo(ev.event.message.message_id).length > 0 && repliesTo(ev.event.message.message_id));
    expect(reply.body).toMatchObject({ reply_in_thread: true, content: JSON.stringify({ text: "echo: secret hello" }) });
    expect(contextFor("secret hello")[0].conversation).toMatchObject({ conversation_id: "oc_200", thread_id: "omt_thread_1", bot_id: encrypted.botId });
  });

  it("refuses bad signatures, unsigned events, wrong keys, plain bodies and wrong tokens in encrypted mode", async () => {
    const before = runner.calls.length;
    const ev = () => received("oc_300", { text: "forged" });
    const body = encrypt(ev());
    const timestamp = String(Math.floor(Date.now() / 1000));
    const badSignature = await postRaw(encrypted.url, body, { "x-lark-request-timestamp": timestamp, "x-lark-request-nonce": "n1", "x-lark-signature": signature(timestamp, "n2", body) });
    const unsigned = await postEncrypted(ev(), { signed: false });
    const wrongKey = await postEncrypted(ev(), { key: "some-other-encrypt-key" });
    const plainBody = await postRaw(encrypted.url, JSON.stringify(ev()));
    const wrongToken = await postEncrypted({ ...ev(), header: { ...ev().header, token: "wrong" } });
    // Signed by Lark, but 13 hours ago (Lark's retries end after about 7): a captured request replayed.
    const old = String(Math.floor(Date.now() / 1000) - 13 * 3600);
    const replayed = await postRaw(encrypted.url, body, { "x-lark-request-timestamp": old, "x-lark-request-nonce": "n1", "x-lark-signature": signature(old, "n1", body) });
    expect(replayed.text).toMatch(/X-Lark-Request-Timestamp is more than 720 minutes away/);
    const encryptedToPlainBot = await postRaw(plain.url, encrypt(ev()));
    for (const res of [badSignature, unsigned, wrongKey, plainBody, wrongToken, encryptedToPlainBot, replayed]) expect(res.status).toBe(401);
    // Nothing was recorded, so nothing can run.
    expect(await host.query("SELECT 1 FROM event_log WHERE conversation_id = 'oc_300'")).toEqual([]);
    expect(runner.calls.length).toBe(before);
  });

  it("never runs a redelivered event twice (each retry encrypted anew)", async () => {
    const ev = received("oc_400", { text: "exactly once" });
    await postEncrypted(ev);
    await waitFor(() => repliesTo(ev.event.message.message_id).length > 0);
    for (let i = 0; i < 2; i++) expect((await postEncrypted(ev)).status).toBe(200);
    // A barrier instead of a sleep: once a later message of the chat is answered, a second run of the first would have been too.
    const marker = received("oc_400", { text: "marker" });
    await postEncrypted(marker);
    await waitFor(() => repliesTo(marker.event.message.message_id).length > 0);
    expect(contextFor("exactly once")).toHaveLength(1);
    expect(repliesTo(ev.event.message.message_id)).toHaveLength(1);
  });

  it("streams into a card patched at most once a second, ending exactly on the final text", async () => {
    const ev = received("oc_500", { text: "stream alpha beta gamma delta epsilon" });
    await postPlain(ev);
    const final = "alpha beta gamma delta epsilon";
    const [card] = await waitFor(() => repliesTo(ev.event.message.message_id).length > 0 && repliesTo(ev.event.message.message_id));
    expect(card.body.msg_type).toBe("interactive");
    const cardId = (card.reply!.json as any).data.message_id;
    const patches = await waitFor(() => patchesOf(cardId).some((p) => cardText(p.body.content) === final) && patchesOf(cardId), 15_000, "the final patch");
    expect(cardText(patches.at(-1)!.body.content)).toBe(final);
    for (const gap of gapsBetween([card.at, ...patches.map((p) => p.at)])) expect(gap).toBeGreaterThanOrEqual(950);
  });

  it("sends one complete text message when the agent's policy turns streaming off", async () => {
    const ev = received("oc_550", { text: "stream no streaming here" });
    await postEncrypted(ev);
    const runId = await waitFor(() => contextFor("stream no streaming here")[0]?.run_id);
    await host.waitForRun(runId);
    const [reply] = await waitFor(() => repliesTo(ev.event.message.message_id).length > 0 && repliesTo(ev.event.message.message_id));
    expect(reply.body).toMatchObject({ msg_type: "text", content: JSON.stringify({ text: "no streaming here" }) });
    await new Promise((r) => setTimeout(r, 300));
    expect(repliesTo(ev.event.message.message_id)).toHaveLength(1);
    expect(fake.calls.filter((c) => c.method === "PATCH" && c.path.endsWith((reply.reply!.json as any).data.message_id))).toEqual([]);
    expect(contextFor("stream no streaming here")[0].delivery).toMatchObject({ supports_streaming: false, supports_edit: true });
  });

  it.each([
    ["the app's", 429, 99991400],
    ["a chat's", 400, 230020],
  ])("waits out %s rate limit before replying again", async (_which, status, code) => {
    const ev = received(`oc_600_${code}`, { text: "busy lark" });
    throttledMessages.set(ev.event.message.message_id, { status, code });
    await postPlain(ev);
    const replies = await waitFor(() => repliesTo(ev.event.message.message_id).length >= 2 && repliesTo(ev.event.message.message_id));
    expect(replies[1].at - replies[0].at).toBeGreaterThanOrEqual(950);
    // The same uuid both times: Lark would drop a duplicate of a send whose answer was lost.
    expect(replies[0].body.uuid).toBe(replies[1].body.uuid);
  });

  it("never lets an agent's text mention everyone", async () => {
    const ev = received("oc_610", { text: '<at user_id="all"></at> and < AT user_id="all">' });
    await postPlain(ev);
    const [reply] = await waitFor(() => repliesTo(ev.event.message.message_id).length > 0 && repliesTo(ev.event.message.message_id));
    const { text } = JSON.parse(reply.body.content);
    expect(text).not.toMatch(/<\s*at\b/i);
    // It reads the same: only a zero-width space was added.
    expect(text.replaceAll("\u200b", "")).toContain('<at user_id="all"></at> and < AT user_id="all">');
  });

  it("renders an answer's Markdown in a card 2.0 markdown element, every mention in it inert; format plain shows it as before", async () => {
    const ev = received("oc_md", { text: '**bold** `<at id=all></at>` <at id=all></at> <at user_id="all"></at> 1. a_b' });
    await postPlain(ev);
    const [reply] = await waitFor(() => repliesTo(ev.event.message.message_id).length > 0 && repliesTo(ev.event.message.message_id));
    expect(statusOf(reply)).toBe(200);
    expect(reply.body.msg_type).toBe("interactive");
    expect(JSON.parse(reply.body.content)).toEqual({
      schema: "2.0",
      config: { update_multi: true },
      body: { elements: [{ tag: "markdown", content: 'echo: **bold** `<\u200bat id=all></at>` &#60;at id=all&#62;&#60;/at&#62; &#60;at user&#95;id="all"&#62;&#60;/at&#62; 1. a&#95;b' }] },
    });
    // An agent whose delivery_policy.format is plain: a text message and a card 1.0 of plain_text, as before.
    const agent = { agent_id: "lark-plain-format", name: "plain", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: "oc_plain_format", bot_id: plain.botId }, delivery_policy: { format: "plain" } };
    expect((await host.admin("POST", "/v1/admin/agents", agent)).status).toBe(201);
    const once = received("oc_plain_format", { text: "**bold** <at id=all></at>" });
    await postPlain(once);
    const [text] = await waitFor(() => repliesTo(once.event.message.message_id).length > 0 && repliesTo(once.event.message.message_id), 15_000, "the answer");
    expect(text.body).toMatchObject({ msg_type: "text", content: JSON.stringify({ text: "echo: **bold** <\u200bat id=all></at>" }) });
    const streamed = received("oc_plain_format", { text: "stream **one** two three" });
    await postPlain(streamed);
    const [card] = await waitFor(() => repliesTo(streamed.event.message.message_id).length > 0 && repliesTo(streamed.event.message.message_id), 15_000, "the card");
    const cardId = (card.reply!.json as any).data.message_id;
    await waitFor(() => patchesOf(cardId).some((p) => cardText(p.body.content) === "**one** two three"), 15_000, "the final patch");
    for (const write of [card, ...patchesOf(cardId)]) {
      expect(JSON.parse(write.body.content)).toEqual({ config: { wide_screen_mode: true, update_multi: true }, elements: [{ tag: "div", text: { tag: "plain_text", content: cardText(write.body.content) } }] });
    }
  });

  it("streams Markdown into a card 2.0 whose open code block shows closed, patched to the final text's rendering", async () => {
    const source = "**alpha**\n```js\nlet a = 1;\nlet b = 2;\nlet c = 3;\n```\ndone";
    const ev = received("oc_md_stream", { text: `stream ${source}` });
    await postPlain(ev);
    const [card] = await waitFor(() => repliesTo(ev.event.message.message_id).length > 0 && repliesTo(ev.event.message.message_id));
    const cardId = (card.reply!.json as any).data.message_id;
    await waitFor(() => patchesOf(cardId).some((p) => cardText(p.body.content) === source), 20_000, "the final patch");
    // Every write (each checked by the fake as Lark would) is the one card 2.0, its Markdown rendered.
    const writes = [card, ...patchesOf(cardId)];
    for (const write of writes) {
      expect(statusOf(write)).toBe(200);
      expect(JSON.parse(write.body.content)).toMatchObject({ schema: "2.0", body: { elements: [{ tag: "markdown" }] } });
    }
    // A draft shown mid-block: the block open in the Markdown, closed in the card.
    expect(writes.some((w) => /^\*\*alpha\*\*\n```js\nlet[^`]*\n```$/.test(cardText(w.body.content)))).toBe(true);
    expect(repliesTo(ev.event.message.message_id)).toHaveLength(1);
  });

  it("renders a table in the card as GFM, which Lark shows as a table, and lists with their numbers and nesting; streamed, no draft shows a line of pipes", async () => {
    const ev = received("oc_md_table", { text: `samefinal ${TABLE_ANSWER}` });
    await postPlain(ev);
    const [reply] = await waitFor(() => repliesTo(ev.event.message.message_id).length > 0 && repliesTo(ev.event.message.message_id), 15_000, "the answer");
    expect(statusOf(reply)).toBe(200);
    expect(reply.body.msg_type).toBe("interactive");
    expect(cardText(reply.body.content)).toBe(TABLE_ANSWER_LARK);
    const streamed = received("oc_md_table", { text: "stream Totals:\n| Item | Qty |\n|---|--:|\n| pens | 3 |\n| paper | 120 |\ndone" });
    await postPlain(streamed);
    const [card] = await waitFor(() => repliesTo(streamed.event.message.message_id).length > 0 && repliesTo(streamed.event.message.message_id), 15_000, "the card");
    const cardId = (card.reply!.json as any).data.message_id;
    const final = "Totals:\n\n| Item | Qty |\n| --- | ---: |\n| pens | 3 |\n| paper | 120 |\n\ndone";
    await waitFor(() => patchesOf(cardId).some((p) => cardText(p.body.content) === final), 20_000, "the final patch");
    const writes = [card, ...patchesOf(cardId)];
    expect(writes.length).toBeGreaterThan(2);
    for (const write of writes) {
      expect(statusOf(write)).toBe(200);
      expect(cardText(write.body.content)).not.toContain("&#124;");
    }
  });

  it("sends the same text again as it is when Lark refuses its Markdown card, a send and each edit, and the trail says so", async () => {
    const ev = received("oc_md_refused", { text: "stream **one** two three four five" });
    refusingMarkdown.add(ev.event.message.message_id);
    await postPlain(ev);
    const source = "**one** two three four five";
    const plainCard = (text: string) => ({ schema: "2.0", config: { update_multi: true }, body: { elements: [{ tag: "div", text: { tag: "plain_text", content: text } }] } });
    const sends = await waitFor(() => repliesTo(ev.event.message.message_id).length >= 2 && repliesTo(ev.event.message.message_id), 15_000, "the card, plain");
    const cardId = (sends[1].reply!.json as any).data.message_id;
    await waitFor(() => patchesOf(cardId).some((p) => statusOf(p) === 200 && cardText(p.body.content) === source), 20_000, "the final text, plain");
    expect(sends.map((c) => [statusOf(c), JSON.parse(c.body.content).body.elements[0].tag])).toEqual([
      [400, "markdown"],
      [200, "div"],
    ]);
    expect(JSON.parse(sends[1].body.content)).toEqual(plainCard("**one**"));
    // Every Markdown patch refused was made again, at once, as the same text plain.
    const patches = patchesOf(cardId);
    for (const [i, patch] of patches.entries()) {
      if (statusOf(patch) === 400) expect(JSON.parse(patches[i + 1].body.content)).toEqual(plainCard(cardText(patch.body.content)));
    }
    expect(patches.filter((p) => statusOf(p) === 400).length).toBeGreaterThan(0);
    expect(patches.filter((p) => statusOf(p) === 200).length).toBe(patches.filter((p) => statusOf(p) === 400).length);
    const runId = contextFor("stream **one** two three four five")[0].run_id;
    await host.waitForRun(runId);
    const trail = await waitFor(async () => {
      const rows = (await host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type LIKE 'delivery.%' ORDER BY seq", [runId])).map((r) => ({ type: r.event_type, ...JSON.parse(r.data_json) }));
      return rows.some((r) => r.type === "delivery.succeeded" && r.operation === "edit") && rows;
    });
    expect(trail.filter((r) => r.operation === "send").map(({ type, attempt, code, will_retry, format }) => ({ type, attempt, code, will_retry, format }))).toEqual([
      { type: "delivery.attempted", attempt: 1, code: undefined, will_retry: undefined, format: undefined },
      { type: "delivery.failed", attempt: 1, code: "lark_230099", will_retry: true, format: undefined },
      { type: "delivery.attempted", attempt: 2, code: undefined, will_retry: undefined, format: "plain" },
      { type: "delivery.succeeded", attempt: 2, code: undefined, will_retry: undefined, format: "plain" },
    ]);
    // Sent once (streaming off): the card refused, the text goes as a text message, as it is.
    const once = received("oc_md_refused_once", { text: "**bold**" });
    refusingMarkdown.add(once.event.message.message_id);
    await postEncrypted(once);
    const replies = await waitFor(() => repliesTo(once.event.message.message_id).length >= 2 && repliesTo(once.event.message.message_id), 15_000, "the text, plain");
    expect(replies.map((r) => [statusOf(r), r.body.msg_type])).toEqual([
      [400, "interactive"],
      [200, "text"],
    ]);
    expect(JSON.parse(replies[1].body.content)).toEqual({ text: "echo: **bold**" });
  });

  it("delivers a welcome for a member join as a new message in the chat", async () => {
    await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "lark-welcome", scope: { type: "bot", id: plain.botId }, eventTypes: ["group.member_joined"] });
    const added = event("im.chat.member.user.added_v1", { chat_id: "oc_620", operator_id: { open_id: "ou_op" }, users: [{ name: "Cy", tenant_key: "tenant_1", user_id: { open_id: "ou_cy" } }] });
    expect((await postPlain(added)).status).toBe(200);
    const created = () => fake.calls.filter((c) => c.path === "/open-apis/im/v1/messages" && c.body?.receive_id === "oc_620");
    const [welcome] = await waitFor(() => created().length > 0 && created(), 10_000, "the welcome");
    expect(welcome.query.get("receive_id_type")).toBe("chat_id");
    expect(welcome.body).toMatchObject({ msg_type: expect.any(String), uuid: expect.any(String) });
  });

  it("answers within Lark's 3 s when its API is slow: the time spent reading the bot's own open_id counts against the file downloads, not on top of them", async () => {
    const created = await host.admin("POST", "/v1/admin/bots", { platform: "lark", api_base_url: fake.url, credentials: { app_id: SLOW_APP_ID, app_secret: APP_SECRET, verification_token: VERIFICATION_TOKEN } });
    expect(created.status).toBe(201);
    await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "lark-slow", scope: { type: "bot", id: created.body.bot_id } });
    const mentions = [{ key: "@_user_1", id: { open_id: "ou_slow_bot" }, name: "Slow Bot", tenant_key: "tenant_1" }];
    const post = { title: "", content: [[{ tag: "at", user_id: "@_user_1", user_name: "" }, { tag: "text", text: " what is in this picture?" }], [{ tag: "img", image_key: "img_slow" }]] };
    const ev = received("oc_slow_api", post, { mentions }, "post");
    const started = Date.now();
    const res = await postRaw(created.body.webhook_url, JSON.stringify({ ...ev, header: { ...ev.header, app_id: SLOW_APP_ID } }));
    const took = Date.now() - started;
    expect(res.status).toBe(200);
    // Lark counts a webhook not answered within 3 s as failed, and sends it again.
    expect(took).toBeLessThan(3_000);
    expect(fake.calls.filter((c) => c.path === "/open-apis/bot/v3/info" && c.headers.authorization === `Bearer ${SLOW_TENANT_TOKEN}`)).toHaveLength(1);
    // The words still run, read as addressed to the bot; the picture that could not come in time is said so.
    const ctx = await waitFor(() => runner.contexts.find((c) => c.conversation.conversation_id === "oc_slow_api"), 15_000, "the run");
    expect(ctx.input.text).toBe("what is in this picture?");
    expect(ctx.input.attachments).toEqual([]);
    const recorded = await host.admin("GET", `/v1/events/${encodeURIComponent(ctx.event.event_id)}`);
    expect(recorded.body.metadata.attachments_unavailable).toEqual(expect.any(String));
  });

  it("downloads an image message's resource into an input artifact", async () => {
    const ev = received("oc_700", { image_key: "img_1" }, {}, "image");
    await postPlain(ev);
    await waitFor(() => repliesTo(ev.event.message.message_id).length > 0);
    const download = fake.calls.find((c) => c.path.endsWith("/resources/img_1"))!;
    expect(download.query.get("type")).toBe("image");
    expect(download.headers.authorization).toBe(`Bearer ${TENANT_TOKEN}`);
    const ctx = runner.contexts.find((c) => c.event.event_id === `lark:${plain.botId}:${ev.header.event_id}`);
    const [ref] = ctx.input.attachments;
    expect(ref).toMatchObject({ artifact_type: "image", mime_type: "image/png", size_bytes: IMAGE.length });
    expect(ctx.input.contents).toEqual([{ type: "image", artifact_id: ref.artifact_id }]);
  });

  it("gives the runner the message a reply answers, read by its parent_id: its sender, its words with mentions by name, its files after the message's own", async () => {
    const sender = { id: "ou_bob", id_type: "open_id", sender_type: "user", tenant_key: "tenant_1" };
    readableMessages.set("om_bobs_pdf", { message_id: "om_bobs_pdf", msg_type: "file", chat_id: "oc_reply", deleted: false, updated: false, sender, body: { content: JSON.stringify({ file_key: "file_v2_q3", file_name: "q3.pdf" }) }, mentions: null, upper_message_id: null });
    const mentions = [{ key: "@_user_1", id: { open_id: OUR_OPEN_ID }, name: "Our Bot", tenant_key: "tenant_1" }];
    const asking = received("oc_reply", { text: "@_user_1 summarise this" }, { mentions, parent_id: "om_bobs_pdf", root_id: "om_bobs_pdf" });
    expect((await postPlain(asking)).status).toBe(200);
    await waitFor(() => repliesTo(asking.event.message.message_id).length > 0, 15_000, "the answer");
    const [ctx] = contextFor("summarise this");
    const [read] = fake.calls.filter((c) => c.method === "GET" && c.path === "/open-apis/im/v1/messages/om_bobs_pdf");
    expect(read.headers.authorization).toBe(`Bearer ${TENANT_TOKEN}`);
    // The file is the replied message's resource, fetched as the message's own would be.
    expect(fake.calls.filter((c) => c.path === "/open-apis/im/v1/messages/om_bobs_pdf/resources/file_v2_q3").map((c) => c.query.get("type"))).toEqual(["file"]);
    const [pdf] = ctx.input.attachments;
    expect(ctx.input.attachments).toEqual([expect.objectContaining({ artifact_type: "file", name: "q3.pdf", size_bytes: PDF.length })]);
    expect(await host.r2Object(`artifacts/${pdf.artifact_id}`)).toEqual(PDF);
    expect(ctx.event.data.reply_to).toEqual({ message_id: "om_bobs_pdf", actor: { actor_type: "user", actor_id: "ou_bob", actor_name: null }, text: null, quote: null, attachments: [pdf], unavailable: null });
    // Words: the API's mentions name their user by a plain id; the runner reads the name, as in a received message.
    readableMessages.set("om_cys_note", { message_id: "om_cys_note", msg_type: "text", sender: { ...sender, id: "ou_cy" }, body: { content: JSON.stringify({ text: "@_user_1 can you check the numbers?" }) }, mentions: [{ key: "@_user_1", id: "ou_ada", id_type: "open_id", name: "Ada" }] });
    const words = received("oc_reply", { text: "what does Cy mean?" }, { parent_id: "om_cys_note", root_id: "om_cys_note" });
    await postPlain(words);
    await waitFor(() => repliesTo(words.event.message.message_id).length > 0, 15_000, "the answer");
    const [said] = contextFor("what does Cy mean?");
    expect(said.input.attachments).toEqual([]);
    expect(said.event.data.reply_to).toEqual({ message_id: "om_cys_note", actor: { actor_type: "user", actor_id: "ou_cy", actor_name: null }, text: "@Ada can you check the numbers?", quote: null, attachments: [], unavailable: null });
    expect(contextFor("hello lark")[0].event.data.reply_to, "a message that replies to nothing").toBeNull();
  });

  it("runs a reply whose message cannot be read, saying why as for a file left out: Lark refuses it, or does not answer in the time Lark's 3 s leave", async () => {
    const refused = received("oc_reply_unread", { text: "what is this about?" }, { parent_id: "om_not_readable", root_id: "om_not_readable" });
    expect((await postPlain(refused)).status).toBe(200);
    await waitFor(() => repliesTo(refused.event.message.message_id).length > 0, 15_000, "the answer");
    const [ctx] = contextFor("what is this about?");
    expect(ctx.event.data.reply_to).toEqual({ message_id: "om_not_readable", actor: null, text: null, quote: null, attachments: [], unavailable: expect.stringMatching(/permissions/) });
    const recorded = await host.admin("GET", `/v1/events/${encodeURIComponent(ctx.event.event_id)}`);
    expect(recorded.body.metadata.attachments_unavailable).toMatch(/^the replied message om_not_readable \(.*permissions/);
    // Slow: the webhook is answered in time, and the message's own image still comes.
    const slow = received("oc_reply_slow", { image_key: "img_1" }, { parent_id: SLOW_PARENT, root_id: SLOW_PARENT }, "image");
    const started = Date.now();
    expect((await postPlain(slow)).status).toBe(200);
    expect(Date.now() - started).toBeLessThan(3_000);
    const late = await waitFor(() => runner.contexts.find((c) => c.conversation.conversation_id === "oc_reply_slow"), 15_000, "the run");
    expect(late.input.attachments).toEqual([expect.objectContaining({ artifact_type: "image", size_bytes: IMAGE.length })]);
    expect(late.event.data.reply_to).toMatchObject({ message_id: SLOW_PARENT, text: null, attachments: [], unavailable: expect.stringMatching(/no answer within/) });
  });

  it("reads a reply to a message the bot received as recorded: in a topic, no read of its root nor a second download of the root's image; one expired since is read and fetched again, one recalled has nothing", async () => {
    const topic = { thread_id: "omt_reuse" };
    const root = received("oc_reuse", { image_key: "img_1" }, topic, "image");
    const rootId = root.event.message.message_id;
    const inTopic = () => runner.contexts.filter((c) => c.conversation.conversation_id === "oc_reuse");
    const ran = (messageId: string) => waitFor(() => inTopic().find((c) => c.event.data.message_id === messageId), 15_000, `the run of ${messageId}`);
    const reads = (messageId: string) => fake.calls.filter((c) => c.method === "GET" && c.path === `/open-apis/im/v1/messages/${messageId}`).length;
    const downloads = () => fake.calls.filter((c) => c.path === `/open-apis/im/v1/messages/${rootId}/resources/img_1`).length;
    expect((await postPlain(root)).status).toBe(200);
    const [stored] = (await ran(rootId)).input.attachments;
    expect(downloads()).toBe(1);

    const asking = received("oc_reuse", { text: "what is in it?" }, { ...topic, parent_id: rootId, root_id: rootId });
    expect((await postPlain(asking)).status).toBe(200);
    const ctx = await ran(asking.event.message.message_id);
    expect([reads(rootId), downloads()]).toEqual([0, 1]);
    expect(ctx.input.attachments).toEqual([stored]);
    expect(ctx.event.data.reply_to).toEqual({ message_id: rootId, actor: { actor_type: "user", actor_id: "ou_user_1", actor_name: null }, text: null, quote: null, attachments: [stored], unavailable: null });
    // A reply to that reply: its words as a read gives them, none of the files it had from its own replied message.
    const mentions = [{ key: "@_user_1", id: { open_id: "ou_ada" }, name: "Ada" }];
    const naming = received("oc_reuse", { text: "@_user_1 knows" }, { ...topic, mentions, parent_id: rootId, root_id: rootId });
    expect((await postPlain(naming)).status).toBe(200);
    await ran(naming.event.message.message_id);
    const deeper = received("oc_reuse", { text: "who knows?" }, { ...topic, parent_id: naming.event.message.message_id, root_id: rootId });
    expect((await postPlain(deeper)).status).toBe(200);
    const said = await ran(deeper.event.message.message_id);
    expect(reads(naming.event.message.message_id)).toBe(0);
    expect(said.input.attachments).toEqual([]);
    expect(said.event.data.reply_to).toMatchObject({ message_id: naming.event.message.message_id, text: "@Ada knows", attachments: [], unavailable: null });

    // Expired since: read and downloaded as for a message never received, another artifact.
    readableMessages.set(rootId, { message_id: rootId, msg_type: "image", chat_id: "oc_reuse", deleted: false, sender: { id: "ou_user_1", id_type: "open_id", sender_type: "user" }, body: { content: JSON.stringify({ image_key: "img_1" }) } });
    await host.query("UPDATE artifact SET expires_at = ? WHERE artifact_id = ?", [Date.now() - 1_000, stored.artifact_id]);
    const later = received("oc_reuse", { text: "and now?" }, { ...topic, parent_id: rootId, root_id: rootId });
    expect((await postPlain(later)).status).toBe(200);
    const again = await ran(later.event.message.message_id);
    expect([reads(rootId), downloads()]).toEqual([1, 2]);
    expect(again.input.attachments).toEqual([expect.objectContaining({ artifact_type: "image", size_bytes: IMAGE.length })]);
    expect(again.input.attachments[0].artifact_id).not.toBe(stored.artifact_id);
    expect(again.event.data.reply_to.attachments).toEqual(again.input.attachments);

    // Recalled: its files went with it, and the host knows so without asking Lark (which still gives it here).
    expect((await postPlain(event("im.message.recalled_v1", { message_id: rootId, chat_id: "oc_reuse", recall_time: String(Date.now()), recall_type: "message_owner" }))).status).toBe(200);
    const gone = received("oc_reuse", { text: "where did it go?" }, { ...topic, parent_id: rootId, root_id: rootId });
    expect((await postPlain(gone)).status).toBe(200);
    const none = await ran(gone.event.message.message_id);
    expect([reads(rootId), downloads()]).toEqual([1, 2]);
    expect(none.input.attachments).toEqual([]);
    expect(none.event.data.reply_to).toEqual({ message_id: rootId, actor: null, text: null, quote: null, attachments: [], unavailable: "it was recalled" });
  });

  it("leaves no blob of a reply's own image behind when the database fails the look-up of its replied message's stored file, made after the image was stored alongside", async () => {
    const root = received("oc_reuse_blip", { image_key: "img_1" }, {}, "image");
    const rootId = root.event.message.message_id;
    expect((await postPlain(root)).status).toBe(200);
    const [stored] = (await waitFor(() => runner.contexts.find((c) => c.event.data.message_id === rootId), 15_000, "the root's run")).input.attachments;
    const unnamed = async () => {
      const named = new Set((await host.query<{ r2_key: string }>("SELECT r2_key FROM artifact")).map((r) => r.r2_key));
      return (await host.r2Keys("artifacts/")).filter((k) => !named.has(k));
    };
    const before = new Set(await unnamed());
    const downloads = () => fake.calls.filter((c) => c.path.endsWith("/resources/img_1")).length;
    const fetched = downloads();
    // Its own image (stored alongside the replied message's look-up), then the stored file it re-uses, looked up by id: refused.
    host.databaseOutage({ queries: 1, matching: stored.artifact_id });
    try {
      expect((await postPlain(received("oc_reuse_blip", { image_key: "img_1" }, { parent_id: rootId }, "image"))).status).toBeGreaterThanOrEqual(500);
    } finally {
      host.databaseOutage(false);
    }
    expect(downloads()).toBe(fetched + 1);
    expect((await unnamed()).filter((k) => !before.has(k))).toEqual([]);
  });

  it("reads a reply to the bot's own answer as the host delivered it, without reading Lark: a streamed card's final words, a text's words and the answer's file, the file's own message that file", async () => {
    const reads = (messageId: string) => fake.calls.filter((c) => c.method === "GET" && c.path === `/open-apis/im/v1/messages/${messageId}`).length;
    const ran = (messageId: string) => waitFor(() => runner.contexts.find((c) => c.event.data.message_id === messageId), 15_000, `the run of ${messageId}`);
    /** Every call made for the platform message recorded: the trail is written after the call. */
    const recorded = (messageId: string, calls: number) =>
      waitFor(async () => (await host.query("SELECT seq FROM event_log WHERE event_type = 'delivery.succeeded' AND json_extract(data_json, '$.message_id') = ?", [messageId])).length >= calls, 15_000, `the trail of ${messageId}`);
    const ours = { actor_type: "bot", actor_id: APP_ID, actor_name: null };

    // A streamed answer is a card, which Lark gives no words of: its words are the transcript's final text.
    const asked = received("oc_own_answer", { text: "stream alpha beta gamma" });
    expect((await postPlain(asked)).status).toBe(200);
    const card = (await waitFor(() => repliesTo(asked.event.message.message_id)[0]?.reply?.json as any)).data.message_id as string;
    const patches = await waitFor(() => patchesOf(card).some((p) => cardText(p.body.content) === "alpha beta gamma") && patchesOf(card), 15_000, "the final patch");
    await recorded(card, 1 + patches.length);
    const shorter = received("oc_own_answer", { text: "make it shorter" }, { parent_id: card, root_id: card });
    expect((await postPlain(shorter)).status).toBe(200);
    const ctx = await ran(shorter.event.message.message_id);
    expect(reads(card)).toBe(0);
    expect(ctx.event.data.reply_to).toEqual({ message_id: card, actor: ours, text: "alpha beta gamma", quote: null, attachments: [], unavailable: null });

    // An answer with a file: its text message brings the answer's words and file, the file's message that file alone.
    const attach = received("oc_own_answer", { text: "attach chart.png" });
    expect((await postPlain(attach)).status).toBe(200);
    const [text, image] = (await waitFor(() => repliesTo(attach.event.message.message_id).length >= 2 && repliesTo(attach.event.message.message_id))).map((c) => (c.reply!.json as any).data.message_id as string);
    const runId = (await ran(attach.event.message.message_id)).run_id;
    const [made] = await host.query<{ artifact_id: string }>("SELECT artifact_id FROM artifact WHERE run_id = ?", [runId]);
    for (const [replied, words] of [[text, "here is chart.png"], [image, null]] as const) {
      await recorded(replied, 1);
      const asking = received("oc_own_answer", { text: `and ${replied}?` }, { parent_id: replied, root_id: replied });
      expect((await postPlain(asking)).status).toBe(200);
      const said = await ran(asking.event.message.message_id);
      expect(reads(replied)).toBe(0);
      expect(said.input.attachments).toEqual([expect.objectContaining({ artifact_id: made.artifact_id, artifact_type: "image", name: "chart.png" })]);
      expect(said.event.data.reply_to).toEqual({ message_id: replied, actor: ours, text: words, quote: null, attachments: said.input.attachments, unavailable: null });
    }
  });

  it("reads a reply in a topic thread opened on the bot's main-chat answer as the host delivered it (the chat's record), without reading Lark", async () => {
    const reads = (messageId: string) => fake.calls.filter((c) => c.method === "GET" && c.path === `/open-apis/im/v1/messages/${messageId}`).length;
    const asked = received("oc_own_topic", { text: "stream one two three" });
    expect((await postPlain(asked)).status).toBe(200);
    const card = (await waitFor(() => repliesTo(asked.event.message.message_id)[0]?.reply?.json as any)).data.message_id as string;
    await waitFor(() => patchesOf(card).some((p) => cardText(p.body.content) === "one two three"), 15_000, "the final patch");
    await waitFor(async () => (await host.query("SELECT seq FROM event_log WHERE event_type = 'delivery.succeeded' AND json_extract(data_json, '$.message_id') = ?", [card])).length >= 1 + patchesOf(card).length, 15_000, "the trail");
    // "Reply in thread": a topic of its own, whose root (every reply's parent) is the answer, recorded in the chat's conversation.
    const inThread = received("oc_own_topic", { text: "make it shorter" }, { thread_id: "omt_own_topic", parent_id: card, root_id: card });
    expect((await postPlain(inThread)).status).toBe(200);
    const ctx = await waitFor(() => runner.contexts.find((c) => c.event.data.message_id === inThread.event.message.message_id), 15_000, "the run");
    expect(ctx.conversation.thread_id).toBe("omt_own_topic");
    expect(reads(card)).toBe(0);
    expect(ctx.event.data.reply_to).toEqual({ message_id: card, actor: { actor_type: "bot", actor_id: APP_ID, actor_name: null }, text: "one two three", quote: null, attachments: [], unavailable: null });
  });

  it("keeps a file a reply re-used as long as one it brought itself, past its own message's expiry; a recall of that message meanwhile still takes it", async () => {
    const root = received("oc_reuse_ttl", { image_key: "img_1" }, {}, "image");
    const rootId = root.event.message.message_id;
    const ran = (messageId: string) => waitFor(() => runner.contexts.find((c) => c.event.data.message_id === messageId), 15_000, `the run of ${messageId}`);
    const expiryOf = async (artifactId: string) => Number((await host.query<{ expires_at: number }>("SELECT expires_at FROM artifact WHERE artifact_id = ?", [artifactId]))[0]?.expires_at);
    expect((await postPlain(root)).status).toBe(200);
    const [stored] = (await ran(rootId)).input.attachments;
    // Near the end of its life (its TTL almost spent), yet unexpired: re-used.
    const endsAt = Date.now() + 1_500;
    await host.query("UPDATE artifact SET expires_at = ? WHERE artifact_id = ?", [endsAt, stored.artifact_id]);
    const asking = received("oc_reuse_ttl", { text: "still there?" }, { parent_id: rootId, root_id: rootId });
    expect((await postPlain(asking)).status).toBe(200);
    expect((await ran(asking.event.message.message_id)).input.attachments).toEqual([stored]);

    // Past the message's own expiry the retention sweep leaves it: stored for the reply, it would last the TTL.
    await pause(Math.max(0, endsAt - Date.now()) + 100);
    await host.triggerScheduled();
    expect(await host.r2Object(`artifacts/${stored.artifact_id}`)).not.toBeNull();
    expect(await expiryOf(stored.artifact_id)).toBeGreaterThan(Date.now() + 29 * 24 * 3600 * 1000);

    // Recalled while a reply re-using it is stored (its own image still downloading): the reply does not keep it.
    const gate = deferred();
    heldResources.set("img_held", gate);
    const late = received("oc_reuse_ttl", { image_key: "img_held" }, { parent_id: rootId, root_id: rootId }, "image");
    const posting = postPlain(late);
    await waitFor(() => fake.calls.some((c) => c.path.endsWith("/resources/img_held")), 5_000, "the reply's own image asked for");
    expect((await postPlain(event("im.message.recalled_v1", { message_id: rootId, chat_id: "oc_reuse_ttl", recall_time: String(Date.now()), recall_type: "message_owner" }))).status).toBe(200);
    gate.resolve();
    expect((await posting).status).toBe(200);
    await ran(late.event.message.message_id);
    expect(await expiryOf(stored.artifact_id)).toBeLessThanOrEqual(Date.now());
    expect(await host.r2Object(`artifacts/${stored.artifact_id}`)).toBeNull();
  });

  it("records recalls and member joins, and acknowledges events it does not handle", async () => {
    const recalled = event("im.message.recalled_v1", { message_id: "om_gone", chat_id: "oc_800", recall_time: String(Date.now()), recall_type: "message_owner" });
    const added = event("im.chat.member.user.added_v1", { chat_id: "oc_800", operator_id: { open_id: "ou_op" }, users: [{ name: "Bob", tenant_key: "tenant_1", user_id: { open_id: "ou_bob", union_id: "on_bob" } }] });
    const read = event("im.message.message_read_v1", { reader: { reader_id: { open_id: "ou_user_1" } }, message_id_list: ["om_1"] });
    for (const ev of [recalled, added, read]) expect((await postPlain(ev)).status).toBe(200);
    const rows = await host.query<{ event_type: string; source_event_type: string }>("SELECT event_type, source_event_type FROM event_log WHERE event_id IN (?, ?, ?) ORDER BY seq", [
      `lark:${plain.botId}:${recalled.header.event_id}`,
      `lark:${plain.botId}:${added.header.event_id}:ou_bob`,
      `lark:${plain.botId}:${read.header.event_id}`,
    ]);
    expect(rows).toEqual([
      { event_type: "message.recalled", source_event_type: "im.message.recalled_v1" },
      { event_type: "group.member_joined", source_event_type: "im.chat.member.user.added_v1" },
      { event_type: "platform.unhandled", source_event_type: "im.message.message_read_v1" },
    ]);
  });

  it("withdraws a message recalled while it waits its turn in a topic thread (the recall names no thread): its run ends cancelled, never answered", async () => {
    const busy = received("oc_810", { text: "sleep 1500" }, { thread_id: "omt_810" });
    await postPlain(busy);
    await waitFor(() => contextFor("sleep 1500").length > 0, 10_000, "the busy run");
    const waiting = received("oc_810", { text: "never mind this" }, { thread_id: "omt_810" });
    await postPlain(waiting);
    const after = received("oc_810", { text: "but this" }, { thread_id: "omt_810" });
    await postPlain(after);
    const recall = event("im.message.recalled_v1", { message_id: waiting.event.message.message_id, chat_id: "oc_810", recall_time: String(Date.now()), recall_type: "message_owner" });
    expect((await postPlain(recall)).status).toBe(200);
    const [run] = await host.query<{ status: string; error_code: string }>("SELECT status, error_code FROM run WHERE event_id = ?", [`lark:${plain.botId}:${waiting.header.event_id}`]);
    expect(run).toEqual({ status: "cancelled", error_code: "cancelled" });
    await waitFor(() => repliesTo(after.event.message.message_id).length > 0, 10_000, "the message after it answered");
    expect(contextFor("never mind this")).toEqual([]);
    expect(repliesTo(waiting.event.message.message_id)).toEqual([]);
  });

  it("steer with debounce: the waiting run's own message recalled while it holds later ones: the first of those takes its place, its answer replying to it", async () => {
    // A runner that steers: it answers its message and what it pulls, in one reply.
    const steerer = await startAdHocRunner({
      name: "lark-steerer",
      runners: [{ name: "default", label: { en_US: "s" }, capabilities: { streaming: false, steering: true }, permissions: {} }],
      async onRun({ body }, res) {
        const ctx = body.context;
        const pulled = await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "steering.pull", { mode: "all" });
        resultWriter(res, ctx.run_id).reply(`re: ${[ctx.input.text, ...pulled.body.data.items.map((i: any) => i.input.text)].join("+")}`);
      },
    });
    try {
      expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: steerer.url })).status).toBe(201);
      await putAgent(host, { agent_id: "lark-burst", runner_id: steerer.runnerId(), scope: { type: "conversation", id: "oc_burst", bot_id: plain.botId }, concurrency: { strategy: "steer", debounce_ms: 1500 }, delivery_policy: { streaming: false } });
      const [first, second, third] = ["first", "second", "third"].map((text) => received("oc_burst", { text }));
      for (const ev of [first, second, third]) expect((await postPlain(ev)).status).toBe(200);
      recalledMessages.add(first.event.message.message_id);
      const recall = event("im.message.recalled_v1", { message_id: first.event.message.message_id, chat_id: "oc_burst", recall_time: String(Date.now()), recall_type: "message_owner" });
      expect((await postPlain(recall)).status).toBe(200);
      const [reply] = await waitFor(() => repliesTo(second.event.message.message_id).length > 0 && repliesTo(second.event.message.message_id), 15_000, "the answer to the second message");
      expect(JSON.parse(reply.body.content)).toEqual({ text: "re: second+third" });
      expect(repliesTo(first.event.message.message_id)).toEqual([]);
    } finally {
      await steerer.close();
    }
  });

  it("answers a message recalled once its runner had it: in its topic thread (a reply to the thread's root), else in the chat", async () => {
    const chatPosts = (chatId: string) => fake.calls.filter((c) => c.path === "/open-apis/im/v1/messages" && c.body?.receive_id === chatId);
    // Recalled while the run was going: the reply to it is refused.
    const ev = received("oc_recalled", { text: "recalled meanwhile" });
    recalledMessages.add(ev.event.message.message_id);
    await postPlain(ev);
    const [posted] = await waitFor(() => chatPosts("oc_recalled").length > 0 && chatPosts("oc_recalled"), 15_000, "the answer in the chat");
    expect(posted.body).toMatchObject({ msg_type: "text", content: JSON.stringify({ text: "echo: recalled meanwhile" }) });
    expect(repliesTo(ev.event.message.message_id).map(statusOf)).toEqual([400]);
    const runId = contextFor("recalled meanwhile")[0].run_id;
    const outcome = await waitFor(async () => {
      const rows = await host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type = 'delivery.succeeded'", [runId]);
      return rows.map((r) => JSON.parse(r.data_json))[0];
    }, 15_000, "the delivery record");
    expect(outcome).toMatchObject({ operation: "send", message_id: (posted.reply!.json as any).data.message_id });
    // In a topic thread: the answer stays in the thread, a reply to its root.
    const inThread = received("oc_recalled_thread", { text: "recalled in a thread" }, { thread_id: "omt_recalled", root_id: "om_recalled_root", parent_id: "om_recalled_root" });
    recalledMessages.add(inThread.event.message.message_id);
    await postPlain(inThread);
    const [toRoot] = await waitFor(() => repliesTo("om_recalled_root").length > 0 && repliesTo("om_recalled_root"), 15_000, "the answer in the thread");
    expect(toRoot.body).toMatchObject({ reply_in_thread: true, content: JSON.stringify({ text: "echo: recalled in a thread" }) });
    expect(statusOf(toRoot)).toBe(200);
    expect(chatPosts("oc_recalled_thread")).toEqual([]);
  });

  it("tells the chat once when the tenant's content check refuses an answer (230028), streamed or sent whole; the refusal stays recorded", async () => {
    // Streamed (the plain bot): the first words show in a card, the patch and the final text are refused.
    const streamed = received("oc_dlp_stream", { text: `stream the ${DLP_WORD} figures` });
    // Sent whole (the encrypted bot's agent does not stream): the one message is refused.
    const whole = received("oc_dlp_whole", { text: `the ${DLP_WORD} figures` });
    expect((await postPlain(streamed)).status).toBe(200);
    expect((await postEncrypted(whole)).status).toBe(200);
    const cases = [
      { ev: streamed, text: `stream the ${DLP_WORD} figures`, notice: "(Part of this answer was withheld: this organization's content policy blocked it.)" },
      { ev: whole, text: `the ${DLP_WORD} figures`, notice: "(This answer was withheld: this organization's content policy blocked it.)" },
    ];
    for (const { ev, text, notice } of cases) {
      const runId = (await waitFor(() => contextFor(text)[0], 15_000, "the run")).run_id;
      const given = await waitFor(async () => {
        const rows = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE run_id = ? AND event_type = 'delivery.failed'", [runId]);
        return rows.map((r) => JSON.parse(r.data_json)).find((r) => r.operation === "send" && r.will_retry === false);
      }, 15_000, "the refused send");
      expect(given).toMatchObject({ code: "lark_230028", status: 400 });
      expect(given.error).toMatch(/^The messages do NOT pass the audit, ext=dlp \(the chat was told it was withheld: message om_reply_\d+\)$/);
      // Posted once, as text, where the answer would have gone: nothing it says reached the chat.
      const shown = repliesTo(ev.event.message.message_id).filter((c) => statusOf(c) === 200);
      const notices = shown.filter((c) => c.body.msg_type === "text" && JSON.parse(c.body.content).text === notice);
      expect(notices).toHaveLength(1);
      for (const call of fake.calls.filter((c) => statusOf(c) === 200)) expect(String(call.body?.content ?? "")).not.toContain(DLP_WORD);
    }
  });

  it("still tells the chat when Lark rate-limits the content check's notice at first: the refused send is tried again, and the notice with it", async () => {
    const ev = received("oc_dlp_throttled", { text: `the ${DLP_WORD} totals` });
    const asked = ev.event.message.message_id;
    // The answer is refused for what it says; the notice after it, posted at once, meets the chat's limit (230020) once.
    throttledMessages.set(asked, { status: 400, code: 230020 });
    expect((await postEncrypted(ev)).status).toBe(200);
    const notice = "(This answer was withheld: this organization's content policy blocked it.)";
    const noticeOf = (c: PlatformCall) => statusOf(c) === 200 && c.body.msg_type === "text" && JSON.parse(c.body.content).text === notice;
    await waitFor(() => repliesTo(asked).some(noticeOf), 15_000, "the notice");
    const runId = contextFor(`the ${DLP_WORD} totals`)[0].run_id;
    const refused = await waitFor(async () => {
      const rows = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE run_id = ? AND event_type = 'delivery.failed'", [runId]);
      return rows.map((r) => JSON.parse(r.data_json)).find((r) => r.operation === "send" && r.will_retry === false);
    }, 15_000, "the refused send");
    expect(refused).toMatchObject({ code: "lark_230028" });
    expect(refused.error).toMatch(/\(the chat was told it was withheld: message om_reply_\d+\)$/);
    await pause(500);
    expect(repliesTo(asked).filter(noticeOf)).toHaveLength(1);
  });

  it("answers a message deleted (not recalled) once its runner had it in the chat, as a recalled one", async () => {
    const ev = received("oc_deleted", { text: "deleted meanwhile" });
    refusedReplies.set(ev.event.message.message_id, { code: 230110, msg: "Action unavailable as the message has been deleted." });
    await postPlain(ev);
    const posted = await waitFor(() => fake.calls.find((c) => c.path === "/open-apis/im/v1/messages" && c.body?.receive_id === "oc_deleted"), 15_000, "the answer in the chat");
    expect(posted.body).toMatchObject({ msg_type: "text", content: JSON.stringify({ text: "echo: deleted meanwhile" }) });
    expect(repliesTo(ev.event.message.message_id).map(statusOf)).toEqual([400]);
  });

  it("stops a reply at the first refusal of a chat that removed the bot: its other parts are not tried, and it is recorded once", async () => {
    // Three parts.
    const ev = received("oc_removed", { text: "long 20001" });
    refusedReplies.set(ev.event.message.message_id, { code: 230002, msg: "The bot can not be outside the group." });
    await postPlain(ev);
    const runId = (await waitFor(() => contextFor("long 20001")[0], 15_000, "the run")).run_id;
    // Settled: nothing more is tried after the one refusal.
    const [failures] = await settledRefusals(host, [runId]);
    expect(repliesTo(ev.event.message.message_id).map(statusOf)).toEqual([400]);
    expect(fake.calls.filter((c) => c.body?.receive_id === "oc_removed")).toEqual([]);
    expect(failures).toEqual([expect.objectContaining({ operation: "send", part: 1, code: "lark_230002", will_retry: false })]);
  });

  it("never lends a bot of the same app the tenant token another bot's secret fetched: a wrong app secret fails its replies", async () => {
    // Another bot of the app has fetched (and cached) a token with the right secret.
    const warm = received("oc_right_secret", { text: "warm the token" });
    await postPlain(warm);
    await waitFor(() => repliesTo(warm.event.message.message_id).length > 0, 15_000, "the right secret's reply");
    const created = await host.admin("POST", "/v1/admin/bots", { platform: "lark", api_base_url: fake.url, credentials: { app_id: APP_ID, app_secret: "a-mistyped-app-secret-0000", verification_token: VERIFICATION_TOKEN } });
    expect(created.status).toBe(201);
    answered.push(JSON.stringify(created.body));
    await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "lark-wrong-secret", scope: { type: "bot", id: created.body.bot_id } });
    const ev = received("oc_wrong_secret", { text: "who am i" });
    expect((await postRaw(created.body.webhook_url, JSON.stringify(ev))).status).toBe(200);
    const runId = (await waitFor(() => contextFor("who am i")[0], 15_000, "the run")).run_id;
    // The reply's outcome, whichever it is: sent, or given up.
    const outcome = await waitFor(
      async () => {
        const rows = await host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type IN ('delivery.succeeded', 'delivery.failed') ORDER BY seq", [runId]);
        return rows.map((r) => ({ type: r.event_type, ...JSON.parse(r.data_json) })).find((r) => r.type === "delivery.succeeded" || r.will_retry === false);
      },
      15_000,
      "the reply's outcome",
    );
    expect(repliesTo(ev.event.message.message_id)).toEqual([]);
    expect(outcome).toMatchObject({ type: "delivery.failed", operation: "send", code: "lark_10014" });
  });

  it("keeps the app secret, verification token, encrypt key and tenant token out of every answer, record and log line", async () => {
    await postEncrypted(received("oc_900", { text: "forged" }), { key: "wrong-encrypt-key-000" });
    const list = await host.admin("GET", "/v1/admin/bots");
    answered.push(JSON.stringify(list.body));
    expect(list.body.items.map((b: any) => b.credential_fields)).toContainEqual(["app_id", "app_secret", "encrypt_key", "verification_token"]);
    const records = await host.query<{ row: string }>("SELECT data_json || metadata_json || COALESCE(input_json, '') AS row FROM event_log");
    const raws = await Promise.all((await host.r2Keys("raw/")).map(async (k) => new TextDecoder().decode((await host.r2Object(k))!)));
    expect(host.logs()).toMatch(/webhook refused/);
    for (const secret of [APP_SECRET, VERIFICATION_TOKEN, ENCRYPT_KEY, TENANT_TOKEN]) {
      for (const text of [...answered, ...records.map((r) => r.row), ...raws, host.logs()]) expect(text).not.toContain(secret);
    }
  });
});

describe("Lark/Feishu: files in answers", () => {
  it("uploads an image, then replies with its image_key; any other file (an SVG too) goes up as a file and out by its file_key", async () => {
    for (const [name, kind] of [["chart.png", "image"], ["report.pdf", "file"], ["diagram.svg", "file"]] as const) {
      const ev = received("oc_files", { text: `attach ${name}` });
      await postPlain(ev);
      const messageId = ev.event.message.message_id;
      const replies = await waitFor(() => repliesTo(messageId).length >= 2 && repliesTo(messageId), 15_000, `the ${kind} reply`);
      expect(JSON.parse(replies[0].body.content)).toEqual({ text: `here is ${name}` });
      const upload = fake.calls.filter((c) => c.path === `/open-apis/im/v1/${kind === "image" ? "images" : "files"}`).at(-1)!;
      expect(upload.headers.authorization).toBe(`Bearer ${TENANT_TOKEN}`);
      const form = await formOf(upload);
      const sent = await fileOf(form, kind);
      expect(sent.bytes.equals(ANSWER_FILE)).toBe(true);
      expect(sent.name).toBe(name);
      if (kind === "image") expect(form.get("image_type")).toBe("message");
      else expect([form.get("file_type"), form.get("file_name")]).toEqual(["stream", name]);
      const key = upload.reply!.json as { data: Record<string, string> };
      expect(replies[1].body).toMatchObject({ msg_type: kind, reply_in_thread: false });
      expect(JSON.parse(replies[1].body.content)).toEqual(kind === "image" ? { image_key: key.data.image_key } : { file_key: key.data.file_key });
    }
  });
  it("sends an image Lark refuses as an image as a file instead, so it still reaches the chat", async () => {
    const ev = received("oc_files", { text: "attach tall.png" });
    await postPlain(ev);
    const messageId = ev.event.message.message_id;
    const replies = await waitFor(() => repliesTo(messageId).length >= 2 && repliesTo(messageId), 15_000, "the file reply");
    const uploads = fake.calls.filter((c) => /^\/open-apis\/im\/v1\/(images|files)$/.test(c.path) && c.raw.includes('filename="tall.png"'));
    expect(uploads.map((c) => [c.path, statusOf(c)])).toEqual([
      ["/open-apis/im/v1/images", 400],
      ["/open-apis/im/v1/files", 200],
    ]);
    const form = await formOf(uploads[1]);
    expect([form.get("file_type"), form.get("file_name")]).toEqual(["stream", "tall.png"]);
    expect((await fileOf(form, "file")).bytes.equals(ANSWER_FILE)).toBe(true);
    expect(replies[1].body).toMatchObject({ msg_type: "file" });
    expect(JSON.parse(replies[1].body.content)).toEqual({ file_key: (uploads[1].reply!.json as { data: Record<string, string> }).data.file_key });
    const runId = contextFor("attach tall.png")[0].run_id;
    // The success is recorded after Lark answered the post: waited for, not read at once.
    const sendFile = async () =>
      (await host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type LIKE 'delivery.%' ORDER BY seq", [runId]))
        .filter((r) => JSON.parse(r.data_json).operation === "send_file")
        .map((r) => r.event_type);
    await waitFor(async () => (await sendFile()).length >= 2, 5_000, "the file's delivery records");
    expect(await sendFile()).toEqual(["delivery.attempted", "delivery.succeeded"]);
  });
  it("repeats an upload that got no answer, and a file post too: the retry reuses the uploaded key, so its uuid lets Lark drop the repeat", async () => {
    const fileRecords = async (runId: string) =>
      (await host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type LIKE 'delivery.%' ORDER BY seq", [runId]))
        .map((r) => ({ type: r.event_type, ...JSON.parse(r.data_json) }))
        .filter((r) => r.operation === "send_file" && r.type !== "delivery.attempted");
    cutNextImageUpload = true;
    const image = received("oc_cut", { text: "attach cut.png" });
    const file = received("oc_cut", { text: "attach cut.pdf" });
    cutFilePosts.add(file.event.message.message_id);
    const filesUploaded = fake.calls.filter((c) => c.path === "/open-apis/im/v1/files").length;
    for (const ev of [image, file]) {
      await postPlain(ev);
      const runId = (await waitFor(() => contextFor(ev.event.message.content.includes("png") ? "attach cut.png" : "attach cut.pdf")[0], 10_000, "the run")).run_id;
      const outcomes = await waitFor(async () => {
        const records = await fileRecords(runId);
        return records.some((r) => r.type === "delivery.succeeded" || r.will_retry === false) && records;
      }, 15_000, "the file's delivery");
      expect(outcomes.map((r) => [r.type, r.code ?? null, r.will_retry ?? null])).toEqual([
        ["delivery.failed", "network_error", true],
        ["delivery.succeeded", null, null],
      ]);
    }
    // The image: uploaded again, then posted once.
    expect(repliesTo(image.event.message.message_id).map((r) => r.body.msg_type)).toEqual(["text", "image"]);
    // The file: uploaded once, its post repeated with the same uuid, which Lark answered with the message it had posted.
    expect(fake.calls.filter((c) => c.path === "/open-apis/im/v1/files").length - filesUploaded).toBe(1);
    const posts = repliesTo(file.event.message.message_id).filter((r) => r.body.msg_type === "file");
    expect(posts).toHaveLength(2);
    expect(posts[1].body).toEqual(posts[0].body);
  });
});

describe("Lark/Feishu: card presses (card.action.trigger)", () => {
  /** The callback's card-update token: it changes the card for 30 minutes, so it is a credential. */
  const CARD_TOKEN = "c-card-update-token-0123456789secret";
  let cards = 0;
  /** A card callback (schema 2.0) as Lark sends it for a press in `chatId`: its create_time in microseconds. */
  function cardPress(chatId: string | null, action: Record<string, unknown>) {
    const messageId = `om_card_${++cards}`;
    const payload = event("card.action.trigger", {
      operator: { tenant_key: "tenant_1", user_id: "u_1", open_id: "ou_user_1", union_id: "on_1" },
      token: CARD_TOKEN,
      action,
      host: "im_message",
      context: chatId ? { open_message_id: messageId, open_chat_id: chatId } : {},
    });
    payload.header.create_time = String(Date.now() * 1000);
    return { payload, messageId };
  }
  /** A press on a legacy message card, as Lark posts it to a "Message Card Request URL": no header, the card's own token. */
  function legacyPress(chatId: string, action: Record<string, unknown>) {
    const messageId = `om_card_${++cards}`;
    return { payload: { open_id: "ou_user_1", user_id: "u_1", open_message_id: messageId, open_chat_id: chatId, tenant_key: "tenant_1", token: CARD_TOKEN, action }, messageId };
  }
  /** Lark signs a legacy card callback with the verification token: hex SHA-1(timestamp + nonce + token + raw body). */
  function postLegacy(url: string, body: string, opts: { ageSeconds?: number; token?: string } = {}) {
    const timestamp = String(Math.floor(Date.now() / 1000) - (opts.ageSeconds ?? 0));
    const nonce = randomBytes(8).toString("hex");
    const signed = createHash("sha1").update(timestamp + nonce + (opts.token ?? VERIFICATION_TOKEN) + body).digest("hex");
    return postRaw(url, body, { "x-lark-request-timestamp": timestamp, "x-lark-request-nonce": nonce, "x-lark-signature": signed });
  }

  it("runs a button press as a message: the runner gets its value and who pressed it, the answer replies to the card; Lark gets {} at once", async () => {
    const { payload, messageId } = cardPress("oc_card", { value: { choice: "yes" }, tag: "button", name: "Button_yes" });
    const started = Date.now();
    const res = await postEncrypted(payload);
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(res.status).toBe(200);
    expect(JSON.parse(res.text)).toEqual({});
    const [reply] = await waitFor(() => repliesTo(messageId).length > 0 && repliesTo(messageId), 15_000, "the answer to the press");
    expect(reply.body).toMatchObject({ msg_type: "text", content: JSON.stringify({ text: 'echo: {"choice":"yes"}' }), reply_in_thread: false });
    const [ctx] = contextFor('{"choice":"yes"}');
    expect(ctx.event).toMatchObject({ event_type: "message.received", source: "lark", source_event_type: "card.action.trigger", event_id: `lark:${encrypted.botId}:${payload.header.event_id}` });
    expect(ctx.event.data).toEqual({
      lark_event_id: payload.header.event_id,
      tenant_key: "tenant_1",
      component: { custom_id: "Button_yes", component_type: "button", values: [], value: { choice: "yes" } },
      open_message_id: messageId,
      host: "im_message",
    });
    // Microseconds read as such: the press happened now, not in the year 55,000.
    expect(Math.abs(Date.parse(ctx.event.event_time) - Date.now())).toBeLessThan(60_000);
    expect(ctx.conversation).toMatchObject({ conversation_id: "oc_card", thread_id: null, sender_id: "ou_user_1" });
    expect(ctx.delivery).toMatchObject({ surface: "lark", reply_target: { chat_id: "oc_card", reply_to_message_id: messageId, reply_in_thread: false } });
    // The card's update token is kept nowhere.
    const raw = new TextDecoder().decode((await host.r2Object(ctx.event.raw_ref))!);
    expect(JSON.parse(raw).event.action).toEqual(payload.event.action);
    const stored = await host.query<{ row: string }>("SELECT data_json || metadata_json || COALESCE(input_json, '') AS row FROM event_log");
    for (const text of [raw, ...stored.map((r) => r.row), ...answered]) expect(text).not.toContain(CARD_TOKEN);
  });

  it("answers a card button pressed twice in quick succession once: the second press gets a toast saying the first is being answered", async () => {
    const { payload, messageId } = cardPress("oc_card_twice", { value: { choice: "twice" }, tag: "button", name: "Button_twice" });
    const again = { ...payload, header: { ...payload.header, event_id: `ev_${++seq}_test` } };
    const acks = (await Promise.all([postPlain(payload), postPlain(again)])).map((a) => JSON.parse(a.text));
    expect(acks).toContainEqual({});
    expect(acks).toContainEqual({ toast: { type: "info", content: "Already answering your earlier press of this button." } });
    await waitFor(() => repliesTo(messageId).length > 0, 15_000, "the press's answer");
    await new Promise((r) => setTimeout(r, 300));
    expect(repliesTo(messageId)).toHaveLength(1);
    expect(contextFor('{"choice":"twice"}')).toHaveLength(1);
  });

  it("reads a select's option, an input's words and a form's fields as the input", async () => {
    const select = cardPress("oc_card_select", { tag: "select_static", option: "plan_b", value: { step: "pick" } });
    const input = cardPress("oc_card_input", { tag: "input", input_value: "call me later" });
    const form = cardPress("oc_card_form", { tag: "button", name: "Submit", value: { form: "signup" }, form_value: { who: "Ada", tags: ["x", "y"], agree: true } });
    for (const press of [select, input, form]) expect((await postPlain(press.payload)).status).toBe(200);
    for (const press of [select, input, form]) await waitFor(() => repliesTo(press.messageId).length > 0, 15_000, "each press's answer");
    expect(contextFor("plan_b")[0].event.data.component).toEqual({ custom_id: null, component_type: "select_static", values: ["plan_b"], value: { step: "pick" } });
    expect(contextFor("call me later")[0].conversation).toMatchObject({ conversation_id: "oc_card_input" });
    const [submitted] = contextFor("Ada\nx y");
    expect(submitted.event.data.component.form_value).toEqual({ who: "Ada", tags: ["x", "y"], agree: true });
  });

  it("runs a press on a legacy message card (Message Card Request URL, signed with the verification token), plain or encrypted, as a v2 press runs", async () => {
    // The card URL's challenge, should Lark sign it so, is answered too (encrypted, it is signed no other way).
    const challenge = await postLegacy(encrypted.url, encrypt({ challenge: "ch-card", token: VERIFICATION_TOKEN, type: "url_verification" }));
    expect(JSON.parse(challenge.text)).toEqual({ challenge: "ch-card" });
    const button = legacyPress("oc_legacy", { value: { choice: "legacy" }, tag: "button" });
    const select = legacyPress("oc_legacy_enc", { tag: "select_static", option: "plan_c", value: { step: "pick" } });
    const plainRes = await postLegacy(plain.url, JSON.stringify(button.payload));
    const encRes = await postLegacy(encrypted.url, encrypt(select.payload));
    for (const res of [plainRes, encRes]) expect([res.status, JSON.parse(res.text)]).toEqual([200, {}]);
    await waitFor(() => repliesTo(button.messageId).length > 0, 15_000, "the answer to the plain press");
    const [reply] = await waitFor(() => repliesTo(select.messageId).length > 0 && repliesTo(select.messageId), 15_000, "the answer to the encrypted press");
    expect(reply.body).toMatchObject({ msg_type: "text", content: JSON.stringify({ text: "echo: plan_c" }), reply_in_thread: false });
    const [ctx] = contextFor('{"choice":"legacy"}');
    expect(ctx.event).toMatchObject({ event_type: "message.received", source: "lark", source_event_type: "card.action.trigger_v1" });
    expect(ctx.event.data).toEqual({ lark_event_id: null, tenant_key: "tenant_1", component: { custom_id: null, component_type: "button", values: [], value: { choice: "legacy" } }, open_message_id: button.messageId, host: null });
    // Timed by its signed timestamp (the body has no time).
    expect(Math.abs(Date.parse(ctx.event.event_time) - Date.now())).toBeLessThan(60_000);
    expect(ctx.conversation).toMatchObject({ conversation_id: "oc_legacy", thread_id: null, sender_id: "ou_user_1" });
    expect(ctx.delivery).toMatchObject({ reply_target: { chat_id: "oc_legacy", reply_to_message_id: button.messageId, reply_in_thread: false } });
    expect(contextFor("plan_c")[0].conversation).toMatchObject({ conversation_id: "oc_legacy_enc", bot_id: encrypted.botId });
    // The card's update token is kept nowhere.
    const raw = new TextDecoder().decode((await host.r2Object(ctx.event.raw_ref))!);
    expect(JSON.parse(raw).action).toEqual(button.payload.action);
    const stored = await host.query<{ row: string }>("SELECT data_json || metadata_json || COALESCE(input_json, '') AS row FROM event_log");
    for (const text of [raw, ...stored.map((r) => r.row)]) expect(text).not.toContain(CARD_TOKEN);
  });

  it("refuses a legacy card press signed with another token, signed long ago or not signed; one sent again (encrypted anew) runs once", async () => {
    const forged = legacyPress("oc_legacy_forged", { tag: "button", value: "go" });
    const body = JSON.stringify(forged.payload);
    const otherToken = await postLegacy(plain.url, body, { token: "another-verification-token" });
    const stale = await postLegacy(plain.url, body, { ageSeconds: 10 * 60 });
    expect(stale.text).toMatch(/X-Lark-Request-Timestamp is more than 5 minutes away from now/);
    const unsigned = await postRaw(plain.url, body);
    for (const res of [otherToken, stale, unsigned]) expect(res.status).toBe(401);
    expect(await host.query("SELECT 1 FROM event_log WHERE conversation_id = 'oc_legacy_forged'")).toEqual([]);

    const twice = legacyPress("oc_legacy_twice", { tag: "button", value: "once only" });
    for (let i = 0; i < 2; i++) expect((await postLegacy(encrypted.url, encrypt(twice.payload))).status).toBe(200);
    await waitFor(() => repliesTo(twice.messageId).length > 0, 15_000, "the answer");
    await pause(1_000);
    expect(contextFor("once only")).toHaveLength(1);
    expect(repliesTo(twice.messageId)).toHaveLength(1);
  });

  it("tells the presser by a toast when the press starts no answer: no agent takes it, or the card is in no chat", async () => {
    const created = await host.admin("POST", "/v1/admin/bots", { platform: "lark", api_base_url: fake.url, credentials: { app_id: APP_ID, app_secret: APP_SECRET, verification_token: VERIFICATION_TOKEN } });
    expect(created.status).toBe(201);
    const { payload } = cardPress("oc_card_unbound", { tag: "button", value: "go" });
    const unbound = await postRaw(created.body.webhook_url, JSON.stringify(payload));
    expect(JSON.parse(unbound.text)).toEqual({ toast: { type: "info", content: "No agent answers here." } });
    expect((await host.admin("GET", `/v1/events/lark:${created.body.bot_id}:${payload.header.event_id}`)).body).toMatchObject({ event_type: "message.received", disposition: "unbound" });
    const legacy = await postLegacy(created.body.webhook_url, JSON.stringify(legacyPress("oc_card_unbound", { tag: "button", value: "go" }).payload));
    expect(JSON.parse(legacy.text)).toEqual({ toast: { type: "info", content: "No agent answers here." } });

    const nowhere = cardPress(null, { tag: "button", value: "go" });
    const res = await postPlain(nowhere.payload);
    expect(JSON.parse(res.text)).toEqual({ toast: { type: "info", content: "This interaction is not supported." } });
    expect((await host.admin("GET", `/v1/events/lark:${plain.botId}:${nowhere.payload.header.event_id}`)).body).toMatchObject({ event_type: "platform.unhandled", source_event_type: "card.action.trigger" });
  });
});
