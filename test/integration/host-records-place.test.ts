import { afterAll, beforeAll, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { callHostApi } from "../support/host-api";
import { addTelegramBot, sayOnTelegram, startFakePlatform, telegramBotApi, waitFor } from "../support/fake-platform";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * The host's own EventLog records of a chat run (a denied Host API call, the reply's delivery, the run's failure)
 * name the run's conversation as its events do: its bot and workspace too, so a record read on its own (GET
 * /v1/events/{id}) says which bot's chat it belongs to.
 */
const BOT_TOKEN = "123456:TEST-telegram-host-records";
const SECRET = "tg-secret-host-records-0123";
let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
let bot: { botId: string; webhookUrl: string };

beforeAll(async () => {
  fake = await startFakePlatform(telegramBotApi(BOT_TOKEN));
  runner = await startAdHocRunner({
    name: "records",
    // No permissions: its history.page is denied (a host_api.denied record); then it fails its run.
    runners: [{ name: "default", label: { en_US: "records" }, capabilities: {}, permissions: {} }],
    async onRun({ body }, res) {
      const ctx = body.context;
      await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "history.page", {});
      resultWriter(res, ctx.run_id).send("run.failed", { code: "runner.gave_up", error: "no luck", retryable: false });
      res.end();
    },
  });
  host = await startTestHost();
  bot = await addTelegramBot(host, { apiBaseUrl: fake.url, botToken: BOT_TOKEN, secretToken: SECRET, workspaceId: "acme" }, { runner, agentId: "records" });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

it("records a chat run's denial, delivery and failure with the bot and workspace of its conversation", async () => {
  expect((await sayOnTelegram(bot.webhookUrl, SECRET, "5150", "hello")).status).toBe(200);
  const types = ["host_api.denied", "delivery.attempted", "delivery.succeeded", "run.failed"];
  const rows = await waitFor(async () => {
    const found = await host.query<{ event_id: string; event_type: string; bot_id: string | null; workspace_id: string | null; conversation_id: string }>(
      "SELECT event_id, event_type, bot_id, workspace_id, conversation_id FROM event_log WHERE source = 'system' ORDER BY created_at",
    );
    return types.every((t) => found.some((r) => r.event_type === t)) && found;
  });
  for (const type of types) {
    const row = rows.find((r) => r.event_type === type)!;
    expect({ type, bot_id: row.bot_id, workspace_id: row.workspace_id, conversation_id: row.conversation_id }).toEqual({ type, bot_id: bot.botId, workspace_id: "acme", conversation_id: "5150" });
    const shown = await host.admin("GET", `/v1/events/${encodeURIComponent(row.event_id)}`);
    expect(shown.body).toMatchObject({ bot_id: bot.botId, workspace_id: "acme", conversation_id: "5150" });
  }
});
