import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { startChatRunner, startFakePlatform, telegramBotApi, waitFor } from "../support/fake-platform";

/**
 * A chat run's final write (reply + run.completed) is applied but answered late, and the host's own end writes
 * (host failure, then lost run) are refused until it has landed. The lost-run end finds the run completed: it
 * ends nothing, and the run's kept reply gets the entries the run recorded, so the user gets the answer.
 */
const BOT_TOKEN = "123456:TEST-telegram-bot-token-probe";
const SECRET_TOKEN = "tg-secret-token-probe-0123456789";
let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startChatRunner>>;
let webhookUrl: string;


beforeAll(async () => {
  fake = await startFakePlatform(telegramBotApi(BOT_TOKEN));
  runner = await startChatRunner("late-chat");
  host = await startTestHost({ vars: { DB_QUERY_TIMEOUT_MS: "2000", RUN_WATCHDOG_INTERVAL_MS: "1000" } });
  const created = await host.admin("POST", "/v1/admin/bots", { platform: "telegram", name: "tg", api_base_url: fake.url, credentials: { bot_token: BOT_TOKEN, secret_token: SECRET_TOKEN } });
  expect(created.status).toBe(201);
  webhookUrl = created.body.webhook_url;
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "tg-agent", scope: { type: "bot", id: created.body.bot_id }, eventTypes: ["message.received"] });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

describe("a chat run whose final write was applied late while the host's own end writes were refused", () => {
  it("the user still gets the reply the run completed with", { timeout: 30_000 }, async () => {
    const chat = "-1007799";
    host.databaseOutage({ delayMs: 3_000, matching: "echo: late-late-final" });
    const res = await fetch(webhookUrl, {
      method: "POST",
      headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": SECRET_TOKEN },
      body: JSON.stringify({ update_id: 5091, message: { message_id: 50910, date: Math.floor(Date.now() / 1000), chat: { id: Number(chat), type: "group", title: "g" }, from: { id: 42, is_bot: false, first_name: "Ada" }, text: "late-late-final" } }),
    });
    expect(res.status).toBe(200);
    host.databaseOutage({ queries: 1000, matching: "changes() = 1" });
    await new Promise((r) => setTimeout(r, 4_500));
    host.databaseOutage({ queries: 0 });
    await waitFor(() => fake.callsTo(/\/sendMessage$/).some((c) => String(c.body.chat_id) === chat), 15_000, "the reply in the chat");
    const rows = await host.query<{ run_id: string; status: string }>("SELECT run_id, status FROM run WHERE conversation_id = ?", [chat]);
    const sends = fake.callsTo(/\/sendMessage$/).filter((c) => String(c.body.chat_id) === chat).map((c) => c.body.text);
    expect({ status: rows[0]?.status, sends }).toEqual({ status: "completed", sends: ["echo: late-late-final"] });
  });
});
