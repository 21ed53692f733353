/**
 * The bot's own open_id (`GET /open-apis/bot/v3/info`), so a message's leading `@Bot` can be told from a mention of
 * someone else: the event names each mention's open_id, never which one is the bot. Asked only for a message that
 * mentions someone, and kept per isolate for an hour (an app's bot keeps its open_id); a failure is kept a minute, the
 * message meanwhile read as sent. Each call is bounded well inside Lark's 3 s for the webhook's answer.
 */
import { loggedText } from "../../lib/log-text";
import { asRecord, callPlatform } from "../http";
import { scrubSecrets } from "../redact";
import type { Bot } from "../types";
import { larkApi, type LarkCredentials } from "./api";

const KEPT_MS = 60 * 60 * 1000;
const FAILURE_KEPT_MS = 60 * 1000;
const CALL_TIMEOUT_MS = 1_000;
const known = new Map<string, { key: string; openId: string | null; until: number }>();

/** Null when it cannot be read: the caller then leaves the text as sent. */
export async function ownOpenId(bot: Bot<LarkCredentials>, timeoutMs: number): Promise<string | null> {
  // A bot whose app or API origin changed is another bot to Lark.
  const key = `${bot.apiBaseUrl}\n${bot.credentials.app_id}`;
  const kept = known.get(bot.botId);
  if (kept && kept.key === key && kept.until > Date.now()) return kept.openId;
  const limit = Math.min(timeoutMs, CALL_TIMEOUT_MS);
  const token = await larkApi(bot, limit).tenantToken();
  const reply = token.ok ? await callPlatform(`${bot.apiBaseUrl}/open-apis/bot/v3/info`, { method: "GET", headers: { authorization: `Bearer ${token.value}` } }, limit) : token;
  const body = reply.ok ? asRecord(reply.value.json) : {};
  const openId = body.code === 0 && typeof asRecord(body.bot).open_id === "string" && asRecord(body.bot).open_id !== "" ? String(asRecord(body.bot).open_id) : null;
  if (openId === null) {
    const why = reply.ok ? (typeof body.msg === "string" ? body.msg : `HTTP ${reply.value.status}`) : reply.failure.message;
    console.warn(`lark bot ${bot.botId}: its own open_id was not read (${loggedText(scrubSecrets(why, bot.credentials))}); mentions of it are read as sent; asked again in a minute`);
  }
  // A failure after a success keeps the id it knew.
  const found = openId ?? (kept?.key === key ? kept.openId : null);
  known.set(bot.botId, { key, openId: found, until: Date.now() + (openId === null ? FAILURE_KEPT_MS : KEPT_MS) });
  return found;
}
