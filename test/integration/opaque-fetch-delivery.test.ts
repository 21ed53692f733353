import { describe, expect, it } from "vitest";
import { sayOnTelegram, startChatRunner, telegramBotApi, waitFor } from "../support/fake-platform";
import { namedLogLines } from "../support/host";
import { useTelegramBotHost } from "../support/telegram-bot-host";

/**
 * A platform call workerd's fetch fails with its opaque "internal error; reference = …" (here an answer whose status
 * line is no HTTP): the delivery trail and the bot's last_delivery_failure name its known causes and the reference,
 * not only "could not be reached"; it stays a network_error that may have been applied (a send is not made again),
 * and neither names the bot's token, which the platform's URL carries. The log line of the reply given up on keeps
 * the reference, though it cuts the platform's words at 300 characters: an operator matches it to the runtime's log.
 */
const BOT_TOKEN = "123456:TEST-telegram-bot-token-opaque";
const SECRET_TOKEN = "tg-secret-token-opaque-fetch";
const GARBLED_CHAT = "-100990";
const NAMED = /^the platform could not be reached, or the connection was lost before its answer: the runtime's opaque internal error \(runtime reference [^;\s]+; its known causes: a host name that does not resolve, or an answer that is no readable HTTP, such as a malformed status line or header or headers over 128 KiB in all, or a body whose chunked framing is broken\)$/;

const telegram = telegramBotApi(BOT_TOKEN);
const bot = useTelegramBotHost({
  agentId: "opaque-delivery",
  botToken: BOT_TOKEN,
  secretToken: SECRET_TOKEN,
  api: (call) => (call.path.endsWith("/sendMessage") && String(call.body?.chat_id) === GARBLED_CHAT ? { garbled: true } : telegram(call)),
  captureLogs: true,
  startRunner: () => startChatRunner("opaque-delivery"),
});

describe("a platform call the runtime fails with its opaque error", () => {
  it("is recorded naming the known causes, a send not made again", async () => {
    expect((await sayOnTelegram(bot.webhookUrl, SECRET_TOKEN, GARBLED_CHAT, "hello")).status).toBe(200);
    const runId = await waitFor(() => bot.runner.contexts.find((c) => c.conversation.conversation_id === GARBLED_CHAT)?.run_id, 15_000, "the run");
    const trail = await waitFor(async () => {
      const rows = await bot.host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type LIKE 'delivery.%' ORDER BY seq", [runId]);
      return rows.some((r) => r.event_type === "delivery.failed") && rows.map((r) => ({ type: r.event_type, ...JSON.parse(r.data_json) }));
    }, 15_000, "the failed delivery");
    expect(trail.map((r) => r.type)).toEqual(["delivery.attempted", "delivery.failed"]);
    const reference = /runtime reference ([^;)\s]+)/.exec(trail[1].error)?.[1];
    expect(reference).toBeTruthy();
    const givenUp = namedLogLines(bot.host.logs(), "delivery.failed").filter((line) => line.run_id === runId);
    expect(givenUp).toEqual([expect.objectContaining({ code: "network_error", status: null, operation: "send" })]);
    expect(givenUp[0]!.reason).toContain(`runtime reference ${reference}`);
    expect(trail[1]).toMatchObject({ operation: "send", status: null, code: "network_error", will_retry: false, error: expect.stringMatching(NAMED) });
    const note = await waitFor(async () => (await bot.host.admin("GET", `/v1/admin/bots/${bot.botId}`)).body.last_delivery_failure, 10_000, "the bot's note");
    expect(note).toMatchObject({ code: "network_error", error: trail[1].error });
    expect(bot.fake.callsTo(/\/sendMessage$/)).toHaveLength(1);
    expect(JSON.stringify([trail, note])).not.toContain(BOT_TOKEN);
    expect(bot.host.logs()).not.toContain(BOT_TOKEN);
  });
});
