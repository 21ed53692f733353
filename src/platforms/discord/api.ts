/**
 * Answering a deferred interaction: the first message edits the original
 * response, later ones are follow-ups; both are edited by id. The interaction
 * token in the path is the credential (15 minutes), so URLs are never logged.
 * Rate limits answer 429 with `retry_after` (seconds, fractional) in the body.
 */
import { asRecord, callPlatform, failureOfStatus, retryAfterHeaderMs } from "../http";
import type { ApiResult, Bot, DeliveryTarget, Messenger } from "../types";

export interface DiscordCredentials extends Record<string, string> {
  application_id: string;
  public_key: string;
  bot_token: string;
}

const ORIGINAL = "@original";

export function discordMessenger(bot: Bot<DiscordCredentials>, target: Extract<DeliveryTarget, { platform: "discord" }>, timeoutMs: number): Messenger {
  const webhook = `${bot.apiBaseUrl}/webhooks/${encodeURIComponent(bot.credentials.application_id)}/${encodeURIComponent(target.interactionToken)}`;
  let originalUsed = false;

  async function call(method: string, url: string, content: string): Promise<ApiResult<Record<string, unknown>>> {
    // No @everyone, role or user pings from an agent's text.
    const body = JSON.stringify({ content, allowed_mentions: { parse: [] } });
    const reply = await callPlatform(url, { method, headers: { "content-type": "application/json" }, body }, timeoutMs);
    if (!reply.ok) return reply;
    const { status, headers, json } = reply.value;
    const data = asRecord(json);
    if (status >= 200 && status < 300) return { ok: true, value: data };
    const message = typeof data.message === "string" ? data.message : `HTTP ${status}`;
    const retryAfterMs = typeof data.retry_after === "number" ? Math.ceil(data.retry_after * 1000) : retryAfterHeaderMs(headers);
    return { ok: false, failure: failureOfStatus(status, `discord_http_${status}`, message, retryAfterMs) };
  }

  return {
    async send(text) {
      if (!originalUsed) {
        const res = await call("PATCH", `${webhook}/messages/${ORIGINAL}`, text);
        if (!res.ok) return res;
        originalUsed = true;
        return { ok: true, value: ORIGINAL };
      }
      const res = await call("POST", `${webhook}?wait=true`, text);
      return res.ok ? { ok: true, value: String(res.value.id) } : res;
    },
    async edit(messageId, text) {
      const res = await call("PATCH", `${webhook}/messages/${messageId === ORIGINAL ? ORIGINAL : encodeURIComponent(messageId)}`, text);
      return res.ok ? { ok: true, value: undefined } : res;
    },
  };
}
