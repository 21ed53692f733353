import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { sayOnTelegram, startFakePlatform, telegramBotApi, upgradeOnTelegram } from "../support/fake-platform";
import { holdNextQuery } from "../support/held-query";

/**
 * A bot DELETE reads the bot, then deletes it: only the bot it read (its registration), with the chat moves learned for
 * it (chat_alias), which no later registration of its id would ever read.
 */
const BOT_TOKEN = "781:DELETE-as-read-token";
const SECRET = "delete-as-read-secret-1";

let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
beforeAll(async () => {
  fake = await startFakePlatform(telegramBotApi(BOT_TOKEN));
  host = await startTestHost();
});
afterAll(async () => {
  await host?.dispose();
  await fake?.close();
});

const register = async (botId: string, name: string) => {
  const created = await host.admin("POST", "/v1/admin/bots", { bot_id: botId, platform: "telegram", name, api_base_url: fake.url, credentials: { bot_token: BOT_TOKEN, secret_token: SECRET } });
  expect(created.status).toBe(201);
  return created.body.webhook_url as string;
};
const movesOf = (botId: string) => host.query<{ chat_id: string; conversation_id: string }>("SELECT chat_id, conversation_id FROM chat_alias WHERE bot_id = ? ORDER BY chat_id", [botId]);

describe("a bot DELETE", () => {
  it("removes the chat moves learned for the bot, in the same write", async () => {
    const webhookUrl = await register("moved-bot", "moves");
    await upgradeOnTelegram(webhookUrl, SECRET, "-5100", "-1005100000001");
    expect(await movesOf("moved-bot")).toEqual([{ chat_id: "-1005100000001", conversation_id: "-5100" }]);
    expect((await host.admin("DELETE", "/v1/admin/bots/moved-bot")).status).toBe(204);
    expect(await movesOf("moved-bot")).toEqual([]);
  });

  it("whose bot was deleted and registered anew meanwhile is a 404, and leaves the new bot and its chat moves", async () => {
    await register("racy-bot", "the old one");
    // The first DELETE's write is held (its read done) while another DELETE and a POST of the same id land.
    const hold = holdNextQuery(host, 'delete from \\"bot\\"');
    const slow = host.admin("DELETE", "/v1/admin/bots/racy-bot");
    await hold.heldFrom(slow);
    expect((await host.admin("DELETE", "/v1/admin/bots/racy-bot")).status).toBe(204);
    const webhookUrl = await register("racy-bot", "the new one");
    await upgradeOnTelegram(webhookUrl, SECRET, "-5200", "-1005200000001");
    hold.release();
    const first = await slow;
    expect([first.status, first.body?.error?.code]).toEqual([404, "not_found"]);
    expect(first.body.error.message).toMatch(/^bot racy-bot not found \(deleted meanwhile\)/);
    const now = await host.admin("GET", "/v1/admin/bots/racy-bot");
    expect([now.status, now.body.name]).toEqual([200, "the new one"]);
    expect(await movesOf("racy-bot")).toEqual([{ chat_id: "-1005200000001", conversation_id: "-5200" }]);
  });

  it("leaves no chat move for the bot registered anew that a webhook of the deleted one learned meanwhile", async () => {
    const webhookUrl = await register("moving-bot", "the old one");
    // The group's last service message, naming its supergroup, to the old registration: its move is recorded once the
    // group's own move is read, which is held while the bot is deleted and registered anew under its id.
    const hold = holdNextQuery(host, 'from \\"chat_alias\\"');
    const message = { message_id: 900_001, date: Math.floor(Date.now() / 1000), chat: { id: -5300, type: "group", title: "Team" }, from: { id: 42, is_bot: false, first_name: "Ada" }, migrate_to_chat_id: -1005300000001 };
    const slow = fetch(webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": SECRET }, body: JSON.stringify({ update_id: 990_001, message }) }).then(
      async (res) => ({ status: res.status, body: await res.text() }),
    );
    await hold.heldFrom(slow);
    expect((await host.admin("DELETE", "/v1/admin/bots/moving-bot")).status).toBe(204);
    await register("moving-bot", "the new one");
    hold.release();
    await slow;
    expect(await movesOf("moving-bot")).toEqual([]);
    // The new registration's supergroup is a chat of its own: its messages are recorded in its own conversation.
    expect((await sayOnTelegram(webhookUrl, SECRET, "-1005300000001", "hello from the supergroup")).status).toBe(200);
    const recorded = await host.query<{ conversation_id: string }>("SELECT conversation_id FROM event_log WHERE bot_id = ? AND event_type = 'message.received'", ["moving-bot"]);
    expect(recorded).toEqual([{ conversation_id: "-1005300000001" }]);
  });
});
