import { describe, expect, it } from "vitest";
import { sayOnTelegram, startChatRunner, telegramBotApi, waitFor } from "../support/fake-platform";
import { ADMIN_TOKEN, namedLogLines, SECRETS_KEY } from "../support/host";
import { useTelegramBotHost } from "../support/telegram-bot-host";

/**
 * The two failures an operator alerts on are JSON lines on the Worker's log, as a run's end is: a webhook refused
 * (`{"log":"webhook.refused",…}`) and a reply given up on (`{"log":"delivery.failed",…}`). One line each, with the
 * fields a log query reads; never a secret, the user's words nor the reply's text.
 */
const BOT_TOKEN = "123456:TEST-telegram-bot-token-failure-lines";
const SECRET_TOKEN = "tg-secret-token-failure-lines-0123";
const FORGED_SECRET = "tg-forged-secret-token-from-elsewhere";
const USER_WORDS = "PRIVATE-user-words-3f9a1c";
/** A chat whose user blocked the bot: Telegram refuses every message to it for good. */
const BLOCKED_CHAT = "4242";

const telegram = telegramBotApi(BOT_TOKEN);
const bot = useTelegramBotHost({
  agentId: "failure-lines",
  botToken: BOT_TOKEN,
  secretToken: SECRET_TOKEN,
  captureLogs: true,
  // Its words quote the call's URL, and the bot token in it (as a proxy's may): scrubbed before any line has them.
  api: (call) =>
    call.path.endsWith("/sendMessage") && String(call.body?.chat_id) === BLOCKED_CHAT
      ? { status: 403, json: { ok: false, error_code: 403, description: `Forbidden: bot was blocked by the user (POST /bot${BOT_TOKEN}/sendMessage)` } }
      : telegram(call),
  startRunner: () => startChatRunner("failure-lines"),
});

/** The raw lines named `name`, for what they must never carry. */
const rawLines = (name: string) =>
  bot.host
    .logs()
    .split("\n")
    .filter((line) => line.startsWith(`{"log":"${name}",`));
const NEVER_LOGGED = [BOT_TOKEN, encodeURIComponent(BOT_TOKEN), SECRET_TOKEN, FORGED_SECRET, ADMIN_TOKEN, SECRETS_KEY, USER_WORDS];

describe("failure log lines", () => {
  it("a webhook refused (a bad secret token): one webhook.refused line, its HTTP status second, the bot, the code and the check that failed", async () => {
    const forged = await sayOnTelegram(bot.webhookUrl, FORGED_SECRET, "4343", USER_WORDS);
    expect(forged.status).toBe(401);
    const refusals = () => namedLogLines(bot.host.logs(), "webhook.refused");
    await waitFor(() => refusals().length > 0, 10_000, "the refusal's line");
    const lines = refusals();
    expect(lines).toEqual([{ log: "webhook.refused", status: 401, platform: "telegram", bot_id: bot.botId, code: "unauthorized", reason: "webhook refused: bad or missing X-Telegram-Bot-Api-Secret-Token" }]);
    // Its reason is the one the bot's view notes.
    expect((await bot.host.admin("GET", `/v1/admin/bots/${bot.botId}`)).body.last_webhook_refusal.reason).toBe(lines[0]!.reason);
    expect(rawLines("webhook.refused")).toEqual(['{"log":"webhook.refused","status":401,"platform":"telegram","bot_id":"' + bot.botId + '","code":"unauthorized","reason":"webhook refused: bad or missing X-Telegram-Bot-Api-Secret-Token"}']);
    // The text line it replaces is gone.
    expect(bot.host.logs()).not.toContain(`webhook telegram/${bot.botId}:`);
    for (const kept of NEVER_LOGGED) expect(bot.host.logs()).not.toContain(kept);
  });

  it("a reply given up on (the user blocked the bot): one delivery.failed line naming the run, bot, code, the platform's scrubbed words and what was not delivered, never its text", async () => {
    expect((await sayOnTelegram(bot.webhookUrl, SECRET_TOKEN, BLOCKED_CHAT, USER_WORDS)).status).toBe(200);
    const runId: string = await waitFor(() => bot.runner.contexts.find((c) => c.conversation.conversation_id === BLOCKED_CHAT)?.run_id, 15_000, "the run");
    const run = await bot.host.waitForRun(runId);
    expect(run.status).toBe("completed");
    const ofRun = () => namedLogLines(bot.host.logs(), "delivery.failed").filter((line) => line.run_id === runId);
    await waitFor(() => ofRun().length > 0, 10_000, "the reply's line");
    // The trail's record of it, which the line is made from.
    const [failed] = await waitFor(async () => {
      const rows = await bot.host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE run_id = ? AND event_type = 'delivery.failed'", [runId]);
      return rows.length > 0 && rows.map((r) => JSON.parse(r.data_json) as Record<string, unknown>);
    }, 10_000, "the failure's record");
    expect(failed).toMatchObject({ code: "telegram_403", will_retry: false });
    expect(ofRun()).toEqual([
      {
        log: "delivery.failed",
        run_id: runId,
        platform: "telegram",
        bot_id: bot.botId,
        code: "telegram_403",
        reason: "Forbidden: bot was blocked by the user (POST /bot[redacted]/sendMessage)",
        status: 403,
        operation: "send",
        conversation_id: BLOCKED_CHAT,
        event_id: run.event_id,
        reply: 1,
        item: 1,
        part: 1,
        message_id: null,
        artifact_id: null,
        // The reply's length, not its text.
        chars: `echo: ${USER_WORDS}`.length,
        bytes: null,
        attempts: 1,
      },
    ]);
    expect(rawLines("delivery.failed")[0]).toMatch(new RegExp(`^\\{"log":"delivery\\.failed","run_id":"${runId}","platform":"telegram",`));
    expect(bot.host.logs()).not.toContain("reply not delivered");
    for (const kept of NEVER_LOGGED) expect(bot.host.logs()).not.toContain(kept);
  });
});
