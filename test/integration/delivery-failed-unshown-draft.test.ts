import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { addTelegramBot, sayOnTelegram, startFakePlatform, telegramBotApi, waitFor } from "../support/fake-platform";

/**
 * README (Delivery): "A run asked a question that fails before showing anything still answers, with
 * delivery_policy.failure_notice ... so no user waits on silence". A run whose first delta and its run.failed arrive
 * together has shown nothing when it fails: the chat must get the failure notice, not the unfinished draft posted as
 * if it were the answer.
 */
const BOT_TOKEN = "123456:TEST-telegram-bot-token-unshown";
const SECRET_TOKEN = "tg-secret-token-unshown-draft";
let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
let webhookUrl: string;
const runIds: string[] = [];

beforeAll(async () => {
  fake = await startFakePlatform(telegramBotApi(BOT_TOKEN));
  runner = await startAdHocRunner({
    name: "unshown",
    runners: [{ name: "default", label: { en_US: "unshown" }, capabilities: { streaming: true } }],
    async onRun({ body }, res) {
      runIds.push(body.context.run_id);
      const w = resultWriter(res, body.context.run_id);
      w.send("message.delta", { chunk: { role: "assistant", content: "Let me look that up in the" } });
      w.send("run.failed", { code: "runner.crashed", error: "the runner gave up", retryable: false });
      res.end();
    },
  });
  host = await startTestHost();
  ({ webhookUrl } = await addTelegramBot(host, { apiBaseUrl: fake.url, botToken: BOT_TOKEN, secretToken: SECRET_TOKEN }, { runner: runner, agentId: "unshown" }));
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

describe("a streaming run that fails before anything was shown", () => {
  it("answers with the failure notice, not its unfinished draft", async () => {
    expect((await sayOnTelegram(webhookUrl, SECRET_TOKEN, "-100901", "what is the capital?")).status).toBe(200);
    const runId = await waitFor(() => runIds[0]);
    await host.waitForRun(runId);
    await waitFor(() => fake.callsTo(/\/sendMessage$/).length > 0, 10_000, "a reply");
    await new Promise((r) => setTimeout(r, 1_500));
    const texts = fake.calls.filter((c) => /sendMessage|editMessageText/.test(c.path)).map((c) => c.body.text);
    // Nothing had been shown when the run failed: the user must learn it failed.
    expect(texts.at(-1)).toBe("Sorry, I could not answer this time.");
  });
});
