/**
 * The few Bot API methods the host calls: sendMessage, editMessageText,
 * sendPhoto and sendDocument (multipart uploads), getFile, setWebhook, deleteWebhook, getMe.
 * Every answer is `{ok, result}` or
 * `{ok: false, error_code, description, parameters: {retry_after}}`.
 */
import { loggedId } from "../../lib/log-text";
import { secondsFieldMs } from "../../lib/retry-after";
import { asRecord, callPlatform, mayHaveApplied, repeatable, requestInit } from "../http";
import type { ApiResult, Bot, ChatMove, DeliveryTarget, Messenger, TextFormat } from "../types";
import { mediaEssence, UploadForm, uploadTimeoutMs } from "../upload";
import { telegramHtml } from "./markdown";
import { chatRefusal, TOPIC_NOTES, topicRefusal } from "./topic-gone";

export interface TelegramCredentials extends Record<string, string> {
  bot_token: string;
  secret_token: string;
}

export function telegramApi(bot: Bot<TelegramCredentials>, timeoutMs: number) {
  // The token is part of the URL: this URL must never be logged or recorded.
  const methodUrl = (method: string) => `${bot.apiBaseUrl}/bot${bot.credentials.bot_token}/${method}`;

  /** JSON parameters, or a multipart form for a method that uploads a file. */
  async function call(method: string, params: Record<string, unknown> | UploadForm): Promise<ApiResult<unknown>> {
    const reply = await callPlatform(methodUrl(method), () => requestInit("POST", params), params instanceof UploadForm ? uploadTimeoutMs(timeoutMs, params.file) : timeoutMs);
    if (!reply.ok) return reply;
    const body = asRecord(reply.value.json);
    if (body.ok === true) return { ok: true, value: body.result };
    const status = typeof body.error_code === "number" ? body.error_code : reply.value.status;
    const message = typeof body.description === "string" ? body.description : `HTTP ${reply.value.status}`;
    const { retry_after: retryAfter, migrate_to_chat_id: movedTo } = asRecord(body.parameters);
    if (status === 429) {
      return { ok: false, failure: { kind: "rate_limited", status, code: "rate_limited", message, retryAfterMs: secondsFieldMs(retryAfter) } };
    }
    const moved = typeof movedTo === "number" || typeof movedTo === "string" ? { movedToChatId: String(movedTo) } : {};
    const maybe = status >= 500 && mayHaveApplied(status) ? { maybeApplied: true } : {};
    return { ok: false, failure: { kind: status >= 500 ? "transient" : "permanent", status, code: `telegram_${status}`, message, ...moved, ...maybe } };
  }

  return {
    call,
    /** The download URL of a file (valid about an hour); it embeds the token. */
    async fileUrl(fileId: string): Promise<ApiResult<string>> {
      const res = await call("getFile", { file_id: fileId });
      if (!res.ok) return res;
      const path = asRecord(res.value).file_path;
      if (typeof path !== "string") return { ok: false, failure: { kind: "permanent", status: null, code: "no_file_path", message: "getFile answered without file_path" } };
      return { ok: true, value: `${bot.apiBaseUrl}/file/bot${bot.credentials.bot_token}/${path}` };
    },
    setWebhook: (url: string) => call("setWebhook", { url, secret_token: bot.credentials.secret_token }),
    deleteWebhook: () => call("deleteWebhook", {}),
    getMe: () => call("getMe", {}),
  };
}

const PHOTO_MAX_BYTES = 10_000_000;
const PHOTO_TYPES = new Set(["image/jpeg", "image/png", "image/webp"]);
/**
 * A 400 for the text as rendered (its HTML, a link's URL, or the text it leaves), which the same text sent plain does
 * not get: "can't parse entities: …", "wrong HTTP URL", "message text is empty", "message is too long".
 */
const RENDERING_REFUSED = /entit(y|ies)|parse|url|text is empty|text must be non-empty|message is too long/i;

export function telegramMessenger(
  bot: Bot<TelegramCredentials>,
  target: Extract<DeliveryTarget, { platform: "telegram" }>,
  timeoutMs: number,
  format: TextFormat = "markdown",
  onChatMoved?: (move: ChatMove) => Promise<void>,
): Messenger {
  const api = telegramApi(bot, timeoutMs);
  /** The last text Telegram refused as rendered: its next attempt (calls are made one at a time) goes as it is. */
  let refused: string | null = null;
  /** The text's Markdown as HTML; as it is when plain, refused, or when it would render to nothing. */
  const rendered = (text: string): { text: string; parse_mode?: "HTML" } => {
    const html = format === "markdown" && text !== refused ? telegramHtml(text) : null;
    return html === null ? { text } : { text: html, parse_mode: "HTML" };
  };
  /** A refusal of the rendering is flagged, for the delivery session to make the call again at once. */
  const plainNext = <T>(res: ApiResult<T>, text: string, body: { parse_mode?: string }): ApiResult<T> => {
    if (res.ok || !body.parse_mode || res.failure.status !== 400 || !RENDERING_REFUSED.test(res.failure.message)) return res;
    refused = text;
    return { ok: false, failure: { ...res.failure, refusedFormatting: true } };
  };
  // Only the first message quotes the user's; the rest follow it in the same chat/topic.
  let replied = false;
  let chatId = target.chatId;
  /** The chat each message was posted in: an edit goes there, wherever the next sends go since. */
  const postedIn = new Map<string, string>();
  /**
   * A group upgraded to a supergroup answers with its new id: the next posts go there, and the host is told, so the
   * supergroup's messages go on in the group's conversation (../moved-chats.ts). Answers whether it moved.
   */
  const followed = async (res: ApiResult<unknown>): Promise<boolean> => {
    if (res.ok || res.failure.movedToChatId === undefined || res.failure.movedToChatId === chatId) return false;
    const from = chatId;
    chatId = res.failure.movedToChatId;
    await onChatMoved?.({ from, to: chatId });
    return true;
  };
  /** The topic refused the answer (./topic-gone.ts): the rest goes to the chat itself, after the line saying why. */
  let leftTopic = false;
  let noteOwed: string | null = null;
  /**
   * A post refused for the move is made again in the new chat; one its topic refused, in the chat. A refusal no later
   * call escapes is flagged for the session (placeGone).
   */
  async function inChat(attempt: () => Promise<ApiResult<unknown>>): Promise<ApiResult<unknown>> {
    if (noteOwed !== null) {
      const noted = await api.call("sendMessage", { chat_id: chatId, text: noteOwed });
      // Not posted, or maybe posted: the send is tried again, note first; a note twice is better than none.
      if (!noted.ok) return noted.failure.kind === "permanent" ? { ok: false, failure: chatRefusal(noted.failure, true) } : repeatable(noted);
      noteOwed = null;
    }
    let res = await attempt();
    if (await followed(res)) res = await attempt();
    if (res.ok) return res;
    const refusal = leftTopic || target.messageThreadId === null ? null : topicRefusal(res.failure);
    if (refusal === null) return { ok: false, failure: chatRefusal(res.failure, leftTopic || target.messageThreadId === null) };
    console.warn(`telegram bot ${bot.botId}: topic ${target.messageThreadId} of chat ${loggedId(chatId)} refused the answer (${refusal}); it goes to the chat`);
    [leftTopic, noteOwed] = [true, TOPIC_NOTES[refusal]];
    return inChat(attempt);
  }
  const place = () => ({
    chat_id: chatId,
    ...(target.messageThreadId !== null && !leftTopic ? { message_thread_id: target.messageThreadId } : {}),
    // Once the group moved, the message's id names another message in the supergroup (or none): nothing is quoted.
    // Out of its topic, a reply to it would go back there.
    ...(target.replyToMessageId !== null && !replied && !leftTopic && chatId === target.chatId ? { reply_parameters: { message_id: target.replyToMessageId, allow_sending_without_reply: true } } : {}),
  });
  const sent = (res: ApiResult<unknown>): ApiResult<string> => {
    if (!res.ok) return res;
    replied = true;
    const id = String(asRecord(res.value).message_id);
    postedIn.set(id, chatId);
    return { ok: true, value: id };
  };
  return {
    async send(text) {
      const body = rendered(text);
      return sent(plainNext(await inChat(() => api.call("sendMessage", { ...place(), ...body })), text, body));
    },
    async sendFile(file) {
      // A photo is shown inline but Telegram recompresses it and takes at most 10 MB; anything else goes as a document.
      const form = (field: "photo" | "document") =>
        new UploadForm(Object.fromEntries(Object.entries(place()).map(([name, value]) => [name, typeof value === "object" ? JSON.stringify(value) : String(value)])), field, file);
      if (file.kind === "image" && file.size <= PHOTO_MAX_BYTES && PHOTO_TYPES.has(mediaEssence(file.mimeType))) {
        const res = await inChat(() => api.call("sendPhoto", form("photo")));
        // A photo Telegram will not take as one (its dimensions, its data) still reaches the chat, as a document.
        if (res.ok || res.failure.status !== 400 || res.failure.placeGone) return sent(res);
      }
      return sent(await inChat(() => api.call("sendDocument", form("document"))));
    },
    async edit(messageId, text) {
      // Message ids are per chat: an edit refused for the move is not made in the new chat, where that id is another
      // message (the session posts the text anew instead), but the next posts go straight there.
      const body = rendered(text);
      const res = await api.call("editMessageText", { chat_id: postedIn.get(messageId) ?? chatId, message_id: Number(messageId), ...body });
      await followed(res);
      // Editing to the same text is refused with 400 (the same as rendered: a draft's code block still open shows as
      // the block closed does); for us it is done.
      if (!res.ok && res.failure.status === 400 && /message is not modified/i.test(res.failure.message)) return { ok: true, value: undefined };
      return res.ok ? { ok: true, value: undefined } : plainNext({ ok: false, failure: chatRefusal(res.failure, false) }, text, body);
    },
    chatOf: (messageId) => postedIn.get(messageId),
  };
}
