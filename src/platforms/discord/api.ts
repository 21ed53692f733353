/**
 * Answering a deferred interaction: the first message edits the original
 * response, later ones are follow-ups; both are edited by id. The interaction
 * token in the path is the credential (15 minutes), so URLs are never logged.
 * Rate limits answer 429 with `retry_after` (seconds, fractional) in the body.
 */
import { asRecord, callPlatform, failureOfStatus, requestInit, retryAfterHeaderMs } from "../http";
import type { ApiResult, Bot, DeliveryTarget, Messenger } from "../types";

export interface DiscordCredentials extends Record<string, string> {
  application_id: string;
  public_key: string;
  bot_token: string;
}

const ORIGINAL = "@original";

/** No @everyone, role or user pings from an agent's text. */
const payload = (content: string) => ({ content, allowed_mentions: { parse: [] } });

export function discordMessenger(bot: Bot<DiscordCredentials>, target: Extract<DeliveryTarget, { platform: "discord" }>, timeoutMs: number): Messenger {
  const webhook = `${bot.apiBaseUrl}/webhooks/${encodeURIComponent(bot.credentials.application_id)}/${encodeURIComponent(target.interactionToken)}`;
  let originalUsed = false;

  /** A message's text, or a form carrying a file (its `payload_json` says the same as a text message's JSON). */
  async function call(method: string, url: string, content: string | FormData): Promise<ApiResult<Record<string, unknown>>> {
    const reply = await callPlatform(url, requestInit(method, content instanceof FormData ? content : payload(content)), timeoutMs);
    if (!reply.ok) return reply;
    const { status, headers, json } = reply.value;
    const data = asRecord(json);
    if (status >= 200 && status < 300) return { ok: true, value: data };
    const message = typeof data.message === "string" ? data.message : `HTTP ${status}`;
    const retryAfterMs = typeof data.retry_after === "number" ? Math.ceil(data.retry_after * 1000) : retryAfterHeaderMs(headers);
    return { ok: false, failure: failureOfStatus(status, `discord_http_${status}`, message, retryAfterMs) };
  }

  /** The first message answers the deferred response; the rest are follow-ups. */
  async function post(content: string | FormData): Promise<ApiResult<string>> {
    if (!originalUsed) {
      const res = await call("PATCH", `${webhook}/messages/${ORIGINAL}`, content);
      if (!res.ok) return res;
      originalUsed = true;
      return { ok: true, value: ORIGINAL };
    }
    const res = await call("POST", `${webhook}?wait=true`, content);
    return res.ok ? { ok: true, value: String(res.value.id) } : res;
  }

  return {
    send: (text) => post(text),
    async sendFile(file) {
      const form = new FormData();
      form.append("payload_json", JSON.stringify({ ...payload(""), attachments: [{ id: 0, filename: file.name }] }));
      form.append("files[0]", new File([file.bytes], file.name, { type: file.mimeType }));
      return post(form);
    },
    async edit(messageId, text) {
      const res = await call("PATCH", `${webhook}/messages/${messageId === ORIGINAL ? ORIGINAL : encodeURIComponent(messageId)}`, text);
      return res.ok ? { ok: true, value: undefined } : res;
    },
  };
}
