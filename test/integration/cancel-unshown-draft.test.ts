import { describe, expect, it } from "vitest";
import { type PlatformCall, sayOnTelegram, startChatRunner, telegramBotApi, waitFor } from "../support/fake-platform";
import { useTelegramBotHost } from "../support/telegram-bot-host";

/**
 * README (Delivery): "A run the host cancelled (an operator, a newer message) stays silent, except on Discord". A
 * streaming run whose draft has not reached the chat yet (its reply waits its turn behind an earlier reply still on
 * the wire) and that an operator cancels must show nothing: its unfinished draft must not be posted afterwards.
 */
const BOT_TOKEN = "123456:TEST-telegram-bot-token-cancelunshown";
const SECRET = "tg-secret-token-cancel-unshown-draft";
const api = telegramBotApi(BOT_TOKEN);

const bot = useTelegramBotHost({
  agentId: "cancel-unshown",
  botToken: BOT_TOKEN,
  secretToken: SECRET,
  async api(call: PlatformCall) {
    // The first answer's send is slow: the next run's reply waits its turn behind it.
    if (call.path.endsWith("/sendMessage") && String(call.body?.text).startsWith("echo: first")) await new Promise((r) => setTimeout(r, 3_000));
    return api(call);
  },
  startRunner: () => startChatRunner("cancel-unshown"),
});

describe("an operator cancels a streaming run whose draft was not shown yet", () => {
  it("stays silent: the unfinished draft is never posted", async () => {
    const chat = "-100777";
    expect((await sayOnTelegram(bot.webhookUrl, SECRET, chat, "first")).status).toBe(200);
    expect((await sayOnTelegram(bot.webhookUrl, SECRET, chat, "stream alpha beta gamma delta epsilon zeta eta theta")).status).toBe(200);
    const second = await waitFor(() => bot.runner.contexts.find((c) => String(c.input.text).startsWith("stream "))?.run_id, 15_000, "the streaming run");
    // Two or three deltas in (250 ms apart), while the first answer is still being sent.
    await new Promise((r) => setTimeout(r, 700));
    const cancel = await bot.host.admin("POST", `/v1/runs/${second}/cancel`);
    expect(cancel.status).toBe(202);
    expect((await bot.host.waitForRun(second)).status).toBe("cancelled");
    // The first reply lands; then the cancelled run's reply has had its turn.
    await waitFor(() => bot.fake.callsTo(/\/sendMessage$/).some((c) => String(c.body.text).startsWith("echo: first") && c.reply), 10_000, "the first answer");
    await new Promise((r) => setTimeout(r, 2_000));
    const texts = bot.fake.calls.filter((c) => /sendMessage|editMessageText/.test(c.path)).map((c) => String(c.body.text));
    expect(texts.filter((t) => t.includes("alpha"))).toEqual([]);
  });
});
