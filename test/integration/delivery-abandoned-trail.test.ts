import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { sayOnTelegram, startChatRunner, startFakePlatform, telegramBotApi, waitFor } from "../support/fake-platform";

/** A reply abandoned at its settle timeout records only the calls that reached the platform. */
const BOT_TOKEN = "123456:TEST-telegram-bot-token-deliv";
const SECRET_TOKEN = "tg-secret-token-deliv-0123";
/** Chats whose sendMessage Telegram answers 429 with this retry_after (seconds), every time. */
const throttled = new Map<string, number>();

let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startChatRunner>>;
let webhookUrl: string;


beforeAll(async () => {
  fake = await startFakePlatform(telegramBotApi(BOT_TOKEN, throttled));
  runner = await startChatRunner("tg-deliv");
  host = await startTestHost({ vars: { DELIVERY_SETTLE_TIMEOUT_MS: "1500" } });
  const created = await host.admin("POST", "/v1/admin/bots", { platform: "telegram", api_base_url: fake.url, credentials: { bot_token: BOT_TOKEN, secret_token: SECRET_TOKEN } });
  expect(created.status).toBe(201);
  webhookUrl = created.body.webhook_url;
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "tg-deliv", scope: { type: "bot", id: created.body.bot_id }, eventTypes: ["message.received"] });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

const trail = async (runId: string) =>
  (await host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type LIKE 'delivery.%' ORDER BY seq", [runId])).map((r) => ({ type: r.event_type, ...JSON.parse(r.data_json) }));

describe("Telegram: a reply abandoned at its settle timeout while it waits out a rate limit", () => {
  it("records only the attempts that reached the platform: no 'attempted' for a call that was never made", async () => {
    throttled.set("-100555", 4);
    expect((await sayOnTelegram(webhookUrl, SECRET_TOKEN, "-100555", "abandon me")).status).toBe(200);
    const runId = await waitFor(() => runner.contexts.find((c) => c.input.text === "abandon me")?.run_id);
    await host.waitForRun(runId);
    await waitFor(async () => (await trail(runId)).some((r) => r.code === "settle_timeout"), 10_000, "the settle timeout record");
    await new Promise((r) => setTimeout(r, 1000));
    const calls = fake.callsTo(/\/sendMessage$/).filter((c) => String(c.body.chat_id) === "-100555");
    const records = await trail(runId);
    expect(calls).toHaveLength(1);
    // One call reached Telegram: the trail must show one attempt, not a second "attempted" for the abandoned one.
    expect(records.map((r) => [r.type, r.operation, r.attempt ?? null, r.code ?? null])).toEqual([
      ["delivery.attempted", "send", 1, null],
      ["delivery.failed", "send", 1, "rate_limited"],
      ["delivery.failed", "settle", null, "settle_timeout"],
    ]);
  });
});
