/**
 * Slack Web API: chat.postMessage, chat.update and the external file upload
 * with the bot token as a bearer. Errors come as HTTP 200 `{ok: false, error}`; rate limits as HTTP
 * 429 with `Retry-After` (seconds).
 */
import { asRecord, callPlatform, failureOfStatus, repeatable, requestInit, retryAfterHeaderMs } from "../http";
import type { ApiResult, Bot, DeliveryTarget, Messenger, TextFormat } from "../types";
import { slackText } from "./mrkdwn";
import { fileBody, uploadTimeoutMs } from "../upload";
import { postToResponseUrl, RESPONSE_URL_MAX_POSTS, responseUrlSpent, trustedResponseUrl } from "./response-url";

export interface SlackCredentials extends Record<string, string> {
  bot_token: string;
  signing_secret: string;
}

/** Slack's own errors that mean "try again later", not "this request is wrong". */
const TRANSIENT_ERRORS = new Set(["internal_error", "fatal_error", "service_unavailable", "request_timeout", "ratelimited"]);
/** Of those, the ones Slack documents as "some aspect of the operation may have succeeded". */
const MAYBE_APPLIED_ERRORS = new Set(["internal_error", "fatal_error"]);

/** JSON parameters, or form-encoded ones for the methods that take no JSON (the file upload ones). */
export async function slackCall(bot: Bot<SlackCredentials>, method: string, params: Record<string, unknown> | URLSearchParams, timeoutMs: number): Promise<ApiResult<Record<string, unknown>>> {
  const reply = await callPlatform(`${bot.apiBaseUrl}/${method}`, requestInit("POST", params, { authorization: `Bearer ${bot.credentials.bot_token}` }), timeoutMs);
  if (!reply.ok) return reply;
  const { status, headers, json } = reply.value;
  const body = asRecord(json);
  if (status === 200 && body.ok === true) return { ok: true, value: body };
  const error = typeof body.error === "string" ? body.error : `http_${status}`;
  const retryAfterMs = retryAfterHeaderMs(headers);
  if (status === 429 || error === "ratelimited" || error === "rate_limited") return { ok: false, failure: { kind: "rate_limited", status, code: "rate_limited", message: error, retryAfterMs } };
  if (status === 200) {
    const kind = TRANSIENT_ERRORS.has(error) ? "transient" : "permanent";
    return { ok: false, failure: { kind, status, code: `slack_${error}`, message: error, ...(MAYBE_APPLIED_ERRORS.has(error) ? { maybeApplied: true } : {}) } };
  }
  return { ok: false, failure: failureOfStatus(status, `slack_http_${status}`, error, retryAfterMs) };
}

/** Slack's answers for a channel the bot may not post in: not a member (a channel it was never invited to), or none it can see (a DM between people, a private channel). */
const NOT_POSTABLE = new Set(["slack_not_in_channel", "slack_channel_not_found"]);
/** Slack's answer for a channel archived meanwhile: an archived channel is read-only, to the bot and a response_url alike. */
const ARCHIVED = "slack_is_archived";
/** How a message posted by the response_url is named: Slack gives it no ts, and it cannot be edited. */
const BY_RESPONSE_URL = "response_url:";

/**
 * Posts with chat.postMessage; where Slack says the bot may not post there and the target has a response_url (a slash
 * command, a shortcut, a press), the answer goes by that URL instead, `in_channel`, each message as a new one: it takes
 * no edits, so a streamed draft stops there and the text goes whole at the end, in at most the URL's five posts
 * (`postsLeft`: the session makes the last say the rest was cut).
 */
export function slackMessenger(bot: Bot<SlackCredentials>, target: Extract<DeliveryTarget, { platform: "slack" }>, timeoutMs: number, format: TextFormat = "markdown"): Messenger {
  const responseUrl = trustedResponseUrl(target.responseUrl, bot.apiBaseUrl);
  /** Slack refused the channel once: the rest of the answer goes by the response_url without asking again. */
  let viaResponseUrl = false;
  let posted = 0;
  /**
   * A refusal no later call of the reply escapes, flagged for the session (the rest is not tried): the channel archived,
   * or one the bot was removed from or cannot see, when there is no response_url to go on by.
   */
  const placeGone = <T>(res: ApiResult<T>): ApiResult<T> =>
    res.ok || !(res.failure.code === ARCHIVED || (responseUrl === null && NOT_POSTABLE.has(res.failure.code))) ? res : { ok: false, failure: { ...res.failure, placeGone: true } };
  async function byResponseUrl(text: string): Promise<ApiResult<string>> {
    if (posted >= RESPONSE_URL_MAX_POSTS) return responseUrlSpent();
    const res = await postToResponseUrl(responseUrl!, { response_type: "in_channel", text: slackText(text, format) }, timeoutMs);
    return res.ok ? { ok: true, value: `${BY_RESPONSE_URL}${++posted}` } : res;
  }
  return {
    async send(text, { editable }) {
      if (viaResponseUrl && !editable) return byResponseUrl(text);
      const res = await slackCall(bot, "chat.postMessage", { channel: target.channel, text: slackText(text, format), ...(target.threadTs ? { thread_ts: target.threadTs } : {}) }, timeoutMs);
      if (res.ok) return { ok: true, value: String(res.value.ts) };
      if (responseUrl === null || !NOT_POSTABLE.has(res.failure.code)) return placeGone(res);
      viaResponseUrl = true;
      // A draft posted there would stay as it is, and spend one of the URL's five posts: it waits for the whole text.
      if (editable) return { ok: false, failure: { ...res.failure, continuesAs: "response_url" } };
      return byResponseUrl(text);
    },
    async edit(messageId, text) {
      if (messageId.startsWith(BY_RESPONSE_URL)) return { ok: false, failure: { kind: "permanent", status: null, code: "slack_response_url_no_edit", message: "a message posted by a response_url cannot be edited" } };
      const res = await slackCall(bot, "chat.update", { channel: target.channel, ts: messageId, text: slackText(text, format) }, timeoutMs);
      return res.ok ? { ok: true, value: undefined } : placeGone(res);
    },
    postsLeft: () => (viaResponseUrl ? RESPONSE_URL_MAX_POSTS - posted : undefined),
    /**
     * Slack's three steps: an upload URL for the file, its bytes posted there, then the file shared in the channel (or
     * thread). Answers the file id. Nothing is in the channel before the share, so the first two are safe to repeat.
     */
    async sendFile(file) {
      const upload = await slackCall(bot, "files.getUploadURLExternal", new URLSearchParams({ filename: file.name, length: String(file.size) }), timeoutMs);
      if (!upload.ok) return repeatable(upload);
      const { upload_url: url, file_id: fileId } = upload.value;
      if (typeof url !== "string" || typeof fileId !== "string") return { ok: false, failure: { kind: "permanent", status: 200, code: "slack_no_upload_url", message: "files.getUploadURLExternal answered without upload_url or file_id" } };
      const posted = await callPlatform(url, () => ({ method: "POST", headers: { "content-type": file.mimeType }, body: fileBody(file) }), uploadTimeoutMs(timeoutMs, file));
      if (!posted.ok) return repeatable(posted);
      if (posted.value.status !== 200) return repeatable({ ok: false, failure: failureOfStatus(posted.value.status, `slack_upload_http_${posted.value.status}`, `the file upload answered HTTP ${posted.value.status}`, retryAfterHeaderMs(posted.value.headers)) });
      const shared = await slackCall(
        bot,
        "files.completeUploadExternal",
        new URLSearchParams({ files: JSON.stringify([{ id: fileId, title: file.name }]), channel_id: target.channel, ...(target.threadTs ? { thread_ts: target.threadTs } : {}) }),
        timeoutMs,
      );
      return shared.ok ? { ok: true, value: fileId } : placeGone(shared);
    },
  };
}
