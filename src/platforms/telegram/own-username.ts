/**
 * The bot's own username, from getMe, so a group command addressed `/help@OtherBot` can be told from one for this
 * bot, and a leading `@OurBot` from a mention of someone else. Asked only when a message names a bot so, and kept
 * per isolate for a while: a bot renamed in BotFather is known by its new name within the hour. A bot whose token or
 * API origin changed is asked again. A failure is kept a minute: during a Telegram outage each addressed message
 * would otherwise wait out getMe's timeout in the webhook.
 */
import { loggedText } from "../../lib/log-text";
import { asRecord } from "../http";
import { scrubSecrets } from "../redact";
import type { Bot } from "../types";
import { telegramApi, type TelegramCredentials } from "./api";

const KEPT_MS = 60 * 60 * 1000;
const FAILURE_KEPT_MS = 60 * 1000;
/** `username` null: getMe failed with no name known before; not asked again until `until`. */
const known = new Map<string, { token: string; apiBaseUrl: string; username: string | null; until: number }>();

/** Null when getMe fails or names no username and no name was known: the caller then answers the command rather than drop it. */
export async function ownUsername(bot: Bot<TelegramCredentials>, timeoutMs: number): Promise<string | null> {
  const kept = known.get(bot.botId);
  const same = kept !== undefined && kept.token === bot.credentials.bot_token && kept.apiBaseUrl === bot.apiBaseUrl;
  if (same && kept.until > Date.now()) return kept.username;
  const res = await telegramApi(bot, timeoutMs).getMe();
  const username = res.ok ? asRecord(res.value).username : undefined;
  const found = typeof username === "string" && username !== "" ? username : null;
  if (found === null) {
    const why = res.ok ? "it named no username" : loggedText(scrubSecrets(res.failure.message, bot.credentials));
    console.warn(`telegram bot ${bot.botId}: getMe failed (${why}); the name last known is kept, else addressed commands are answered; asked again in a minute`);
  }
  // A failure after a success keeps the name it knew (a rename is rare; an outage answering other bots' commands is not).
  const name = found ?? (same ? kept.username : null);
  known.set(bot.botId, { token: bot.credentials.bot_token, apiBaseUrl: bot.apiBaseUrl, username: name, until: Date.now() + (found === null ? FAILURE_KEPT_MS : KEPT_MS) });
  return name;
}
