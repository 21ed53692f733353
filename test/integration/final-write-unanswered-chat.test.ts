import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { addTelegramBot, type FakeReply, type PlatformCall, startChatRunner, startFakePlatform } from "../support/fake-platform";

/**
 * Same defect as final-write-unanswered.test.ts, seen by a chat user: the run's final write (reply +
 * run.completed) is applied but its answer is late; the host's fallback end finds the run already
 * completed and records nothing, and the reply in progress never hears the final entries nor a notice.
 */
const BOT_TOKEN = "123456:TEST-telegram-bot-token-probe";
const SECRET_TOKEN = "tg-secret-token-probe-0123456789";
let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startChatRunner>>;
let webhookUrl: string;
let nextMessageId = 100;

function telegramApi(call: PlatformCall): FakeReply {
  if (call.path.endsWith("/sendMessage")) return { json: { ok: true, result: { message_id: ++nextMessageId, chat: { id: Number(call.body.chat_id) }, text: call.body.text } } };
  if (call.path.endsWith("/editMessageText")) return { json: { ok: true, result: { message_id: call.body.message_id, text: call.body.text } } };
  return { json: { ok: true, result: true } };
}

beforeAll(async () => {
  fake = await startFakePlatform(telegramApi);
  runner = await startChatRunner("probe-chat");
  host = await startTestHost({ vars: { DB_QUERY_TIMEOUT_MS: "2000" } });
  ({ webhookUrl } = await addTelegramBot(host, { apiBaseUrl: fake.url, botToken: BOT_TOKEN, secretToken: SECRET_TOKEN, name: "tg" }, { runner: runner, agentId: "tg-agent" }));
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

describe("a chat run whose final write was applied but answered late", () => {
  it("the user still gets the reply the run completed with (or at least a notice)", async () => {
    const chat = "-1007700";
    host.databaseOutage({ delayMs: 3_000, matching: "echo: probe-late-final" });
    const res = await fetch(webhookUrl, {
      method: "POST",
      headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": SECRET_TOKEN },
      body: JSON.stringify({ update_id: 5001, message: { message_id: 50010, date: Math.floor(Date.now() / 1000), chat: { id: Number(chat), type: "group", title: "g" }, from: { id: 42, is_bot: false, first_name: "Ada" }, text: "probe-late-final" } }),
    });
    expect(res.status).toBe(200);
    await new Promise((r) => setTimeout(r, 1_000));
    host.databaseOutage({ delayMs: 1_500, matching: "the host failed to record the run" });
    await new Promise((r) => setTimeout(r, 6_000));
    const rows = await host.query<{ run_id: string; status: string }>("SELECT run_id, status FROM run WHERE conversation_id = ?", [chat]);
    const sends = fake.callsTo(/\/sendMessage$/).filter((c) => String(c.body.chat_id) === chat).map((c) => c.body.text);
    expect({ status: rows[0]?.status, sends }).toEqual({ status: "completed", sends: ["echo: probe-late-final"] });
  });
});
