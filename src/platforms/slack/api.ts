/**
 * Slack Web API: chat.postMessage and chat.update with the bot token as a
 * bearer. Errors come as HTTP 200 `{ok: false, error}`; rate limits as HTTP
 * 429 with `Retry-After` (seconds).
 */
import { asRecord, callPlatform, failureOfStatus, retryAfterHeaderMs } from "../http";
import type { ApiResult, Bot, DeliveryTarget, Messenger } from "../types";
import { escapeSlackText } from "./text";

export interface SlackCredentials extends Record<string, string> {
  bot_token: string;
  signing_secret: string;
}

/** Slack's own errors that mean "try again later", not "this request is wrong". */
const TRANSIENT_ERRORS = new Set(["internal_error", "fatal_error", "service_unavailable", "request_timeout", "ratelimited"]);

export async function slackCall(bot: Bot<SlackCredentials>, method: string, params: Record<string, unknown>, timeoutMs: number): Promise<ApiResult<Record<string, unknown>>> {
  const reply = await callPlatform(
    `${bot.apiBaseUrl}/${method}`,
    { method: "POST", headers: { authorization: `Bearer ${bot.credentials.bot_token}`, "content-type": "application/json; charset=utf-8" }, body: JSON.stringify(params) },
    timeoutMs,
  );
  if (!reply.ok) return reply;
  const { status, headers, json } = reply.value;
  const body = asRecord(json);
  if (status === 200 && body.ok === true) return { ok: true, value: body };
  const error = typeof body.error === "string" ? body.error : `http_${status}`;
  const retryAfterMs = retryAfterHeaderMs(headers);
  if (status === 429 || error === "ratelimited") return { ok: false, failure: { kind: "rate_limited", status, code: "rate_limited", message: error, retryAfterMs } };
  if (status === 200) return { ok: false, failure: { kind: TRANSIENT_ERRORS.has(error) ? "transient" : "permanent", status, code: `slack_${error}`, message: error } };
  return { ok: false, failure: failureOfStatus(status, `slack_http_${status}`, error, retryAfterMs) };
}

export function slackMessenger(bot: Bot<SlackCredentials>, target: Extract<DeliveryTarget, { platform: "slack" }>, timeoutMs: number): Messenger {
  return {
    async send(text) {
      const res = await slackCall(bot, "chat.postMessage", { channel: target.channel, text: escapeSlackText(text), ...(target.threadTs ? { thread_ts: target.threadTs } : {}) }, timeoutMs);
      return res.ok ? { ok: true, value: String(res.value.ts) } : res;
    },
    async edit(messageId, text) {
      const res = await slackCall(bot, "chat.update", { channel: target.channel, ts: messageId, text: escapeSlackText(text) }, timeoutMs);
      return res.ok ? { ok: true, value: undefined } : res;
    },
  };
}
