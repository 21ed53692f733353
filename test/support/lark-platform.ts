import { createCipheriv, createHash, randomBytes } from "node:crypto";
import { expect } from "vitest";
import { useChatHost } from "./chat-host";
import type { FakeReply, PlatformCall } from "./fake-platform";
import { larkMessageProblem } from "./lark-markdown";
import { deferred } from "./host-api";

/**
 * The set-up the platform-lark*.test.ts files share: a fake Lark Open API (its refusals driven by the maps and sets
 * returned), a chat runner, and a host with two bots of one app bound to it, one plain and one with an encrypt key
 * (whose agent does not stream). Call it once at a file's top level: it registers the file's beforeAll and afterAll,
 * and each call has its own state.
 */
export function useLarkPlatform() {
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
  let nextImageUploadCut = false;
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

  /** Two bots of one app: one with plain bodies, one with an encrypt key. */
  const plain = { botId: "", url: "" };
  const encrypted = { botId: "", url: "" };
  let replyCount = 0;

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
    if (call.path === "/open-apis/im/v1/images" && call.method === "POST" && nextImageUploadCut) {
      nextImageUploadCut = false;
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

  async function api(call: PlatformCall): Promise<FakeReply> {
    const held = heldResources.get(call.path.split("/resources/")[1] ?? "");
    if (held) return held.promise.then(() => ({ bytes: IMAGE, headers: { "content-type": "image/png" } }));
    if (call.path === `/open-apis/im/v1/messages/${SLOW_PARENT}`) await pause(2_500);
    return (await slowLarkApi(call)) ?? larkApi(call);
  }

  const chatHost = useChatHost({
    api,
    runnerName: "lark-chat",
    secrets: [APP_SECRET, VERIFICATION_TOKEN, ENCRYPT_KEY, TENANT_TOKEN, SLOW_TENANT_TOKEN],
    async ready() {
      const { host } = chatHost;
      for (const [bot, extra] of [[plain, {}], [encrypted, { encrypt_key: ENCRYPT_KEY }]] as const) {
        const credentials = { app_id: APP_ID, app_secret: APP_SECRET, verification_token: VERIFICATION_TOKEN, ...extra };
        const created = await chatHost.addBot({ platform: "lark", api_base_url: chatHost.fake.url, credentials }, { agentId: `lark-${bot === plain ? "plain" : "enc"}` });
        bot.botId = created.botId;
        bot.url = created.webhookUrl;
      }
      // The encrypted bot's agent does not stream: its replies are plain text messages, sent once complete.
      const agent = await host.admin("GET", "/v1/admin/agents/lark-enc");
      const { agent_id: _id, created_at: _c, updated_at: _u, ...input } = agent.body;
      expect((await host.admin("PUT", "/v1/admin/agents/lark-enc", { ...input, delivery_policy: { streaming: false } })).status).toBe(200);
    },
  });
  const { answered } = chatHost;

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

  const repliesTo = (messageId: string) => chatHost.fake.calls.filter((c) => c.path === `/open-apis/im/v1/messages/${messageId}/reply`);
  const patchesOf = (messageId: string) => chatHost.fake.calls.filter((c) => c.method === "PATCH" && c.path === `/open-apis/im/v1/messages/${messageId}`);
  /** The HTTP status the fake answered a call with. */
  const statusOf = (call: PlatformCall) => call.reply?.status ?? 200;
  /** What a card shows: its markdown element's content (card 2.0), or its plain_text (1.0, or 2.0 as it is). */
  function cardText(content: string): string {
    const card = JSON.parse(content);
    const [element] = card.schema === "2.0" ? card.body.elements : card.elements;
    return element.tag === "markdown" ? element.content : element.text.content;
  }

  return Object.assign(chatHost, {
    /** The next image upload loses its connection before an answer. */
    cutNextImageUpload() {
      nextImageUploadCut = true;
    },
    /** A fresh number for an event id. */
    nextSeq: () => ++seq,
    APP_ID, APP_SECRET, VERIFICATION_TOKEN, ENCRYPT_KEY, TENANT_TOKEN, OUR_OPEN_ID, IMAGE, PDF, DLP_WORD, SLOW_PARENT, SLOW_APP_ID, SLOW_TENANT_TOKEN,
    throttledMessages, cutFilePosts, postedUuids, cardSchemas, refusingMarkdown, recalledMessages, refusedReplies, readableMessages, heldResources,
    plain, encrypted, pause, encrypt, signature, postRaw, postPlain, postEncrypted, event, received, repliesTo, patchesOf, statusOf, cardText,
  });
}
export type LarkPlatform = ReturnType<typeof useLarkPlatform>;
