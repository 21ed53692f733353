import { secretsEqual } from "../../lib/crypto";
import * as z from "zod";
import { HostError } from "../../lib/errors";
import type { PlatformAdapter } from "../types";
import { bodyKey, unhandledEvent } from "../unhandled";
import { parseBody, refused } from "../verify";
import { telegramApi, telegramMessenger, type TelegramCredentials } from "./api";
import { callbackAnswer } from "./callback";
import { chatMoveOf, mayContinueChat } from "./chat-move";
import { TELEGRAM_TABLE_COLUMNS } from "./markdown";
import { namesABot, normalizeUpdate, UpdateSchema } from "./normalize";
import { ownUsername } from "./own-username";

const CredentialsSchema = z.strictObject({
  bot_token: z.string().regex(/^\d+:[A-Za-z0-9_-]+$/, "bot_token must look like 123456:ABC-DEF..."),
  // What setWebhook accepts as secret_token: 1-256 of A-Z a-z 0-9 _ -.
  secret_token: z.string().regex(/^[A-Za-z0-9_-]{1,256}$/, "secret_token must be 1-256 characters of A-Z a-z 0-9 _ -"),
});

/**
 * New credentials also need a secret_token of at least 16 characters: it is all that authenticates the webhook,
 * so it must not be guessable (no runner service or Slack secret may be shorter). Only for new ones: a bot stored
 * before keeps working with its shorter token until its credentials are replaced.
 */
const NewCredentialsSchema = CredentialsSchema.extend({
  secret_token: z.string().regex(/^[A-Za-z0-9_-]{16,256}$/, "secret_token must be 16-256 characters of A-Z a-z 0-9 _ -"),
});

/**
 * Telegram: each update is verified by the secret token given to setWebhook,
 * echoed in `X-Telegram-Bot-Api-Secret-Token`; deduplicated by `update_id`.
 */
/** The Bot API takes uploads of up to 50 MB (photos up to 10 MB; larger images go as documents). */
const TELEGRAM_UPLOAD_MAX_BYTES = 50_000_000;

export const telegram: PlatformAdapter<TelegramCredentials> = {
  name: "telegram",
  credentials: CredentialsSchema,
  newCredentials: NewCredentialsSchema,
  defaultApiBaseUrl: "https://api.telegram.org",
  // sendMessage text is 1-4096 characters after its HTML is parsed (no longer than its Markdown source, so the source is
  // split at that size); editMessageText edits in place.
  surface: { canEdit: true, maxMessageSize: 4096, tableColumns: TELEGRAM_TABLE_COLUMNS, maxFileBytes: TELEGRAM_UPLOAD_MAX_BYTES, capabilities: { threads: "forum_topics", reply_quotes: true } },

  async receive(bot, req) {
    if (!(await secretsEqual(req.headers.get("x-telegram-bot-api-secret-token"), bot.credentials.secret_token))) throw refused("bad or missing X-Telegram-Bot-Api-Secret-Token");
    const body = parseBody(req.rawBody);
    const update = UpdateSchema.safeParse(body);
    // Verified but not an update we can read: recorded and acknowledged, so Telegram does not retry it.
    if (!update.success) return { kind: "events", raw: body, events: [unhandledEvent(await bodyKey(req.rawBody), "unknown")] };
    // A paused bot calls no platform API (getMe): its event is only recorded, its words as sent.
    const username = bot.enabled && namesABot(update.data) ? await ownUsername(bot, req.apiTimeoutMs) : null;
    const events = normalizeUpdate(update.data, { id: bot.credentials.bot_token.split(":")[0], username });
    const chatMove = chatMoveOf(update.data);
    return { kind: "events", raw: body, events: chatMove ? events.map((e) => ({ ...e, chatMove })) : events };
  },

  // A press is closed by the answer itself (Telegram runs the method it names): no API call, nor its wait, needed.
  acknowledge: (recorded) => callbackAnswer(recorded[0]) ?? { ok: true },

  async download(bot, file, _event, timeoutMs) {
    const url = await telegramApi(bot, timeoutMs).fileUrl(file.ref);
    if (!url.ok) throw new HostError(400, "attachment_unavailable", `Telegram getFile failed: ${url.failure.message}`);
    return { kind: "url", url: url.value, name: file.name, mimeType: file.mimeType, artifactType: file.artifactType };
  },

  registerWebhook: (bot, url, timeoutMs) => telegramApi(bot, timeoutMs).setWebhook(url),
  removeWebhook: (bot, timeoutMs) => telegramApi(bot, timeoutMs).deleteWebhook(),
  // An update carries no secret of ours.
  redactRaw: (raw) => raw,
  messenger: (bot, target, timeoutMs, opts) => {
    if (target.platform !== "telegram") throw new Error("not a Telegram target");
    return telegramMessenger(bot, target, timeoutMs, opts?.format, opts?.onChatMoved);
  },
  mayContinueChat,
  replyTargetView: (t) => (t.platform === "telegram" ? { chat_id: t.chatId, message_thread_id: t.messageThreadId, reply_to_message_id: t.replyToMessageId } : {}),
};
