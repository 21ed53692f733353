import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { sayOnTelegram, startChatRunner, startFakePlatform, telegramBotApi, waitFor } from "../support/fake-platform";

/** Delivery while the database blips: the trail's records and the reply's bot are asked for again until it answers. */
const BOT_TOKEN = "123456:TEST-telegram-bot-token-delivery-db";
const SECRET_TOKEN = "tg-secret-token-delivery-db-0123";

let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startChatRunner>>;
let webhookUrl: string;


beforeAll(async () => {
  fake = await startFakePlatform(telegramBotApi(BOT_TOKEN));
  runner = await startChatRunner("tg-delivery-db");
  host = await startTestHost();
  const created = await host.admin("POST", "/v1/admin/bots", { platform: "telegram", api_base_url: fake.url, credentials: { bot_token: BOT_TOKEN, secret_token: SECRET_TOKEN } });
  expect(created.status).toBe(201);
  webhookUrl = created.body.webhook_url;
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "tg-delivery-db", scope: { type: "bot", id: created.body.bot_id }, eventTypes: ["message.received"] });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

const trail = async (runId: string) =>
  (await host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type LIKE 'delivery.%' ORDER BY seq", [runId])).map((r) => ({ type: r.event_type, ...JSON.parse(r.data_json) }));

describe("Telegram: the delivery trail across a database blip", () => {
  it("keeps the record that the reply was delivered when its first write fails once (README: every attempt and outcome is in EventLog)", async () => {
    // The next write of a delivery.succeeded fact fails once, as a database that is briefly unreachable.
    host.databaseOutage({ queries: 1, matching: "delivery.succeeded" });
    expect((await sayOnTelegram(webhookUrl, SECRET_TOKEN, "-100556", "record me")).status).toBe(200);
    const runId = await waitFor(() => runner.contexts.find((c) => c.input.text === "record me")?.run_id);
    await host.waitForRun(runId);
    await waitFor(() => fake.callsTo(/\/sendMessage$/).some((c) => String(c.body.chat_id) === "-100556" && c.reply?.status === undefined), 10_000, "the reply sent");
    // Written when tried again. endLostRun relies on this very record (runsStore.deliveredReply) to decide whether to send a failure notice.
    await waitFor(async () => (await trail(runId)).some((r) => r.type === "delivery.succeeded"), 10_000, "the delivery.succeeded record");
    expect((await trail(runId)).filter((r) => r.type === "delivery.succeeded")).toHaveLength(1);
  });
});

describe("Telegram: a reply whose bot cannot be loaded for a few seconds", () => {
  it("still reaches the chat once the database answers again (a blip of a few seconds drops no completed answer)", async () => {
    const chat = "-100557";
    const sent = () => fake.callsTo(/\/sendMessage$/).filter((c) => String(c.body.chat_id) === chat).map((c) => c.body.text);
    expect((await sayOnTelegram(webhookUrl, SECRET_TOKEN, chat, "sleep 1500")).status).toBe(200);
    expect((await sayOnTelegram(webhookUrl, SECRET_TOKEN, chat, "queued behind")).status).toBe(200);
    // The database fails the next four reads of the bot's row (the queued run's reply, as it starts): a blip of a few seconds.
    host.databaseOutage({ queries: 4, matching: 'from \\"bot\\"' });
    const runId = await waitFor(() => runner.contexts.find((c) => c.input.text === "queued behind")?.run_id, 15_000, "the queued run");
    expect((await host.waitForRun(runId)).status).toBe("completed");
    await waitFor(() => sent().length === 2, 15_000, "the queued run's reply");
    expect(sent()).toEqual(["echo: sleep 1500", "echo: queued behind"]);
    // The bot's row was asked for again, backing off, until the database answered.
    const connect = (await trail(runId)).filter((r) => r.operation === "connect").map((r) => [r.attempt, r.code, r.will_retry]);
    expect(connect).toEqual([1, 2, 3, 4].map((n) => [n, "bot_not_loaded", true]));
  }, 40_000);
});
