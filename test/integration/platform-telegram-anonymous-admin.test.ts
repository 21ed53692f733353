/**
 * Telegram anonymous group admins. README: "a Telegram anonymous admin is a person". Their updates
 * carry `from` = Telegram's placeholder GroupAnonymousBot (id 1087968824, the same in every group) and
 * `sender_chat` = the group. Taken as that bot, every anonymous admin of every group is one actor, so what an
 * agent keeps in actor state for one group's admin is shown to another group's.
 */
import { describe, expect, it } from "vitest";
import { type FakeReply, type PlatformCall, waitFor } from "../support/fake-platform";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { useTelegramBotHost } from "../support/telegram-bot-host";

const BOT_TOKEN = "123456:ANON-telegram-bot-token-abcdef";
const SECRET_TOKEN = "anon-tg-secret-token";

const contexts: any[] = [];
let nextId = 100;

function telegramApi(call: PlatformCall): FakeReply {
  if (call.path.endsWith("/sendMessage")) return { json: { ok: true, result: { message_id: ++nextId } } };
  if (call.path.endsWith("/editMessageText")) return { json: { ok: true, result: { message_id: call.body.message_id } } };
  return { status: 404, json: { ok: false, error_code: 404, description: "Not Found" } };
}

const bot = useTelegramBotHost({
  agentId: "anon-memo-agent",
  botToken: BOT_TOKEN,
  secretToken: SECRET_TOKEN,
  api: telegramApi,
  startRunner: () => startAdHocRunner({
    name: "anon-memo",
    async onRun({ body }, res) {
      const ctx = body.context;
      contexts.push(ctx);
      const w = resultWriter(res, ctx.run_id);
      const text = String(ctx.input.text ?? "");
      if (text.startsWith("remember ")) w.send("state.updated", { scope: "actor", key: "memo", value: text.slice("remember ".length) });
      w.reply(`ok ${text}`);
    },
  }),
});

let updateId = 5000;
async function anonymousAdminSays(chatId: number, text: string) {
  const id = ++updateId;
  const update = {
    update_id: id,
    message: {
      message_id: id,
      date: Math.floor(Date.now() / 1000),
      chat: { id: chatId, type: "supergroup", title: `group ${chatId}` },
      from: { id: 1087968824, is_bot: true, first_name: "Group", username: "GroupAnonymousBot" },
      sender_chat: { id: chatId, type: "supergroup", title: `group ${chatId}` },
      text,
    },
  };
  const res = await fetch(bot.webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": SECRET_TOKEN }, body: JSON.stringify(update) });
  expect(res.status).toBe(200);
  return waitFor(() => contexts.find((c) => c.input.text === text), 15_000, `the run for ${text}`);
}

describe("Telegram anonymous admins", () => {
  it("does not show one group's anonymous admin the actor state kept for another group's", async () => {
    const first = await anonymousAdminSays(-1001111, "remember the launch code is 0000");
    await waitFor(() => bot.fake.callsTo(/\/sendMessage$/).some((c) => c.body.text === "ok remember the launch code is 0000"), 15_000, "the first reply");
    const second = await anonymousAdminSays(-1002222, "what do you remember about me?");
    // Two different people in two different groups.
    expect.soft(second.state.actor?.memo, "another group's admin reads the first one's actor state").toBeUndefined();
    expect.soft(second.actor, "two people, one actor").not.toEqual(first.actor);
  });
});
