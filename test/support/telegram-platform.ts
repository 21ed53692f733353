import { useChatHost } from "./chat-host";
import type { FakeReply, PlatformCall } from "./fake-platform";
import { telegramHtmlProblem } from "./telegram-html";

/**
 * The set-up the platform-telegram*.test.ts files share: a fake Bot API (its refusals driven by the chats and sets
 * returned) and a host with one bot bound to a chat runner. Call it once at a file's top level: it registers the file's
 * beforeAll and afterAll, and each call has its own state.
 */
export function useTelegramPlatform(hostOptions: { storageDrill?: boolean; vars?: Record<string, string> } = {}) {
  /** Values tests change as well as read: the last update_id handed out. */
  const state = { updateId: 1000 };
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

  let nextMessageId = 9000;

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

  const chatHost = useChatHost({
    api: telegramApi,
    runnerName: "telegram-chat",
    hostOptions,
    secrets: [BOT_TOKEN, SECRET_TOKEN],
    async ready() {
      const bot = { platform: "telegram", name: "tg", api_base_url: chatHost.fake.url, credentials: { bot_token: BOT_TOKEN, secret_token: SECRET_TOKEN } };
      await chatHost.addBot(bot, { agentId: "tg-agent", eventTypes: ["message.received"] });
    },
  });
  const { answered } = chatHost;

  function update(chatId: string, message: Record<string, unknown>, id = ++state.updateId) {
    return {
      update_id: id,
      message: { message_id: id * 10, date: Math.floor(Date.now() / 1000), chat: { id: Number(chatId), type: "supergroup", title: "Test group" }, from: { id: 42, is_bot: false, first_name: "Ada", username: "ada" }, ...message },
    };
  }

  async function post(body: unknown, secret: string | null = SECRET_TOKEN) {
    const res = await fetch(chatHost.webhookUrl, { method: "POST", headers: { "content-type": "application/json", ...(secret === null ? {} : { "x-telegram-bot-api-secret-token": secret }) }, body: JSON.stringify(body) });
    const text = await res.text();
    answered.push(text);
    return { status: res.status, body: text ? JSON.parse(text) : null };
  }

  const sendsTo = (chat: string) => chatHost.fake.callsTo(/\/sendMessage$/).filter((c) => String(c.body.chat_id) === chat);
  const editsOf = (chat: string) => chatHost.fake.callsTo(/\/editMessageText$/).filter((c) => String(c.body.chat_id) === chat);
  /** The message id the fake gave a send. */
  // A FakeReply's json is whatever shape the fake answered.
  const messageIdOf = (send: PlatformCall) => (send.reply?.json as any)?.result?.message_id;

  return Object.assign(chatHost, {
    state, BOT_TOKEN, SECRET_TOKEN, PHOTO, throttledChats, LEAKY_CHAT, BLOCKED_CHAT, KICKED_CHAT, UPGRADED_GROUP, ITS_SUPERGROUP, UPGRADED_MID_REPLY, ITS_NEW_SUPERGROUP,
    OUR_USERNAME, NO_GETME_TOKEN, FORGED_LINE, droppingChats, cutEditChats, REFUSING_FILES, REFUSING_HTML,
    update, post, sendsTo, editsOf, messageIdOf,
  });
}
export type TelegramPlatform = ReturnType<typeof useTelegramPlatform>;
