import { describe, expect, it } from "vitest";
import { type PlatformCall, startChatRunner, telegramBotApi, waitFor } from "../support/fake-platform";
import { useTelegramBotHost } from "../support/telegram-bot-host";

/**
 * Replies in the order their runs ended (ReplyOrder): a reply waiting its turn behind a slow earlier reply gets its
 * whole settle window after that reply, not what is left of a window spent waiting.
 */
const BOT_TOKEN = "123456:TEST-telegram-bot-token-order1";
const SECRET = "tg-secret-token-order-window-0123";
/** Every sendMessage takes this long (well within PLATFORM_API_TIMEOUT_MS). */
const CALL_LATENCY_MS = 1_500;
const SETTLE_MS = 4_000;

const api = telegramBotApi(BOT_TOKEN);

const bot = useTelegramBotHost({
  agentId: "order-agent",
  botToken: BOT_TOKEN,
  secretToken: SECRET,
  async api(call: PlatformCall) {
    if (call.path.endsWith("/sendMessage")) await new Promise((r) => setTimeout(r, CALL_LATENCY_MS));
    return api(call);
  },
  vars: { DELIVERY_SETTLE_TIMEOUT_MS: String(SETTLE_MS) },
  startRunner: () => startChatRunner("order-window"),
});

let updateId = 5000;
async function say(chat: string, text: string) {
  const id = ++updateId;
  const message = { message_id: id, date: Math.floor(Date.now() / 1000), chat: { id: Number(chat), type: "supergroup" }, from: { id: 42, is_bot: false, first_name: "Ada" }, text };
  const res = await fetch(bot.webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": SECRET }, body: JSON.stringify({ update_id: id, message }) });
  expect(res.status).toBe(200);
}

const trailOf = async (runId: string) =>
  (await bot.host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type LIKE 'delivery.%' ORDER BY seq", [runId])).map((r) => ({ type: r.event_type, ...JSON.parse(r.data_json) }));

describe("ReplyOrder and the settle window", () => {
  it("a reply that waited its turn behind a slow earlier reply still gets its whole window, and comes after it", async () => {
    const chat = "-700100";
    // First: 9000 characters (3 parts, 4.5 s of calls: past its 4 s window). Second: 5000 (2 parts, 3 s: within one).
    await say(chat, "long 9000");
    await say(chat, "long 5000");
    const second = (await waitFor(() => bot.runner.contexts.find((c) => c.input.text === "long 5000")?.run_id, 15_000, "the second run"))!;
    expect((await bot.host.waitForRun(second)).status).toBe("completed");
    // The second reply is over: both parts sent, or abandoned.
    const trail = await waitFor(
      async () => {
        const t = await trailOf(second);
        return (t.filter((r) => r.type === "delivery.succeeded").length >= 2 || t.some((r) => r.code === "settle_timeout")) && t;
      },
      20_000,
      "the second reply's end",
    );
    expect(trail.filter((r) => r.code === "settle_timeout")).toEqual([]);
    const sends = bot.fake.callsTo(/\/sendMessage$/).filter((c) => String(c.body.chat_id) === chat);
    // The first answer's three parts (the third already on its way when its window closed), then the second's two.
    expect(sends.map((c) => c.body.text.length)).toHaveLength(5);
    expect(sends.slice(0, 3).reduce((n, c) => n + c.body.text.length, 0)).toBe(9000);
    expect(sends.slice(3).reduce((n, c) => n + c.body.text.length, 0)).toBe(5000);
  });
});
