/**
 * The bot's own username, from getMe, so a group command addressed `/help@OtherBot` can be told from one for this
 * bot. Asked only when a command names a bot (rare), and kept per isolate for a while: a bot renamed in BotFather is
 * known by its new name within the hour. A bot whose token or API origin changed is asked again.
 */
import { asRecord } from "../http";
import { scrubSecrets } from "../redact";
import type { Bot } from "../types";
import { telegramApi, type TelegramCredentials } from "./api";

const KEPT_MS = 60 * 60 * 1000;
const known = new Map<string, { token: string; apiBaseUrl: string; username: string; until: number }>();

/** Null when getMe fails or names no username: the caller then answers the command rather than drop it. */
export async function ownUsername(bot: Bot<TelegramCredentials>, timeoutMs: number): Promise<string | null> {
  const kept = known.get(bot.botId);
  if (kept && kept.token === bot.credentials.bot_token && kept.apiBaseUrl === bot.apiBaseUrl && kept.until > Date.now()) return kept.username;
  const res = await telegramApi(bot, timeoutMs).getMe();
  const username = res.ok ? asRecord(res.value).username : undefined;
  if (typeof username !== "string" || !username) {
    // Not kept: the next addressed command asks again.
    const why = res.ok ? "it named no username" : scrubSecrets(res.failure.message, bot.credentials);
    console.warn(`telegram bot ${bot.botId}: getMe failed (${why}); a command addressed to a bot is answered`);
    return null;
  }
  known.set(bot.botId, { token: bot.credentials.bot_token, apiBaseUrl: bot.apiBaseUrl, username, until: Date.now() + KEPT_MS });
  return username;
}
