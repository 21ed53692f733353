import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { addTelegramBot, type PlatformCall, sayOnTelegram, startChatRunner, startFakePlatform, telegramBotApi, waitFor } from "../support/fake-platform";

/**
 * README (Delivery): "A run the host cancelled (an operator, a newer message) stays silent, except on Discord". A
 * streaming run whose draft has not reached the chat yet (its reply waits its turn behind an earlier reply still on
 * the wire) and that an operator cancels must show nothing: its unfinished draft must not be posted afterwards.
 */
const BOT_TOKEN = "123456:TEST-telegram-bot-token-cancelunshown";
const SECRET = "tg-secret-token-cancel-unshown-draft";
let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startChatRunner>>;
let webhookUrl: string;
const api = telegramBotApi(BOT_TOKEN);

beforeAll(async () => {
  fake = await startFakePlatform(async (call: PlatformCall) => {
    // The first answer's send is slow: the next run's reply waits its turn behind it.
    if (call.path.endsWith("/sendMessage") && String(call.body?.text).startsWith("echo: first")) await new Promise((r) => setTimeout(r, 3_000));
    return api(call);
  });
  runner = await startChatRunner("cancel-unshown");
  host = await startTestHost();
  ({ webhookUrl } = await addTelegramBot(host, { apiBaseUrl: fake.url, botToken: BOT_TOKEN, secretToken: SECRET }, { runner: runner, agentId: "cancel-unshown" }));
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

describe("an operator cancels a streaming run whose draft was not shown yet", () => {
  it("stays silent: the unfinished draft is never posted", async () => {
    const chat = "-100777";
    expect((await sayOnTelegram(webhookUrl, SECRET, chat, "first")).status).toBe(200);
    expect((await sayOnTelegram(webhookUrl, SECRET, chat, "stream alpha beta gamma delta epsilon zeta eta theta")).status).toBe(200);
    const second = await waitFor(() => runner.contexts.find((c) => String(c.input.text).startsWith("stream "))?.run_id, 15_000, "the streaming run");
    // Two or three deltas in (250 ms apart), while the first answer is still being sent.
    await new Promise((r) => setTimeout(r, 700));
    const cancel = await host.admin("POST", `/v1/runs/${second}/cancel`);
    expect(cancel.status).toBe(202);
    expect((await host.waitForRun(second)).status).toBe("cancelled");
    // The first reply lands; then the cancelled run's reply has had its turn.
    await waitFor(() => fake.callsTo(/\/sendMessage$/).some((c) => String(c.body.text).startsWith("echo: first") && c.reply), 10_000, "the first answer");
    await new Promise((r) => setTimeout(r, 2_000));
    const texts = fake.calls.filter((c) => /sendMessage|editMessageText/.test(c.path)).map((c) => String(c.body.text));
    expect(texts.filter((t) => t.includes("alpha"))).toEqual([]);
  });
});
