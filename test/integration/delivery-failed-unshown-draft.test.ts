import { describe, expect, it } from "vitest";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { sayOnTelegram, telegramBotApi, waitFor } from "../support/fake-platform";
import { useTelegramBotHost } from "../support/telegram-bot-host";

/**
 * README (Delivery): "A run asked a question that fails before showing anything still answers, with
 * delivery_policy.failure_notice ... so no user waits on silence". A run whose first delta and its run.failed arrive
 * together has shown nothing when it fails: the chat must get the failure notice, not the unfinished draft posted as
 * if it were the answer.
 */
const BOT_TOKEN = "123456:TEST-telegram-bot-token-unshown";
const SECRET_TOKEN = "tg-secret-token-unshown-draft";
const runIds: string[] = [];

const bot = useTelegramBotHost({
  agentId: "unshown",
  botToken: BOT_TOKEN,
  secretToken: SECRET_TOKEN,
  api: telegramBotApi(BOT_TOKEN),
  startRunner: () => startAdHocRunner({
    name: "unshown",
    runners: [{ name: "default", label: { en_US: "unshown" }, capabilities: { streaming: true } }],
    async onRun({ body }, res) {
      runIds.push(body.context.run_id);
      const w = resultWriter(res, body.context.run_id);
      w.send("message.delta", { chunk: { role: "assistant", content: "Let me look that up in the" } });
      w.send("run.failed", { code: "runner.crashed", error: "the runner gave up", retryable: false });
      res.end();
    },
  }),
});

describe("a streaming run that fails before anything was shown", () => {
  it("answers with the failure notice, not its unfinished draft", async () => {
    expect((await sayOnTelegram(bot.webhookUrl, SECRET_TOKEN, "-100901", "what is the capital?")).status).toBe(200);
    const runId = await waitFor(() => runIds[0]);
    await bot.host.waitForRun(runId);
    await waitFor(() => bot.fake.callsTo(/\/sendMessage$/).length > 0, 10_000, "a reply");
    await new Promise((r) => setTimeout(r, 1_500));
    const texts = bot.fake.calls.filter((c) => /sendMessage|editMessageText/.test(c.path)).map((c) => c.body.text);
    // Nothing had been shown when the run failed: the user must learn it failed.
    expect(texts.at(-1)).toBe("Sorry, I could not answer this time.");
  });
});
