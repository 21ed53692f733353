import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sayOnTelegram, waitFor } from "../support/fake-platform";
import { startTelegramChat } from "../support/telegram-chat";

/**
 * RUN_MAX_MESSAGES in chat (README, Writing a runner): a run whose run.completed brings one message more than the cap
 * fails `runner.too_many_messages`; the chat shows the messages before it, not that one, and no failure notice on top
 * of them; the chat's next run answers as usual.
 */
let chat: Awaited<ReturnType<typeof startTelegramChat>>;

beforeAll(async () => {
  chat = await startTelegramChat("message-cap", { vars: { RUN_MAX_MESSAGES: "1" } });
});
afterAll(async () => {
  await chat?.dispose();
});

const sentTo = (chatId: string) => chat.fake.callsTo(/\/sendMessage$/).filter((c) => String(c.body.chat_id) === chatId).map((c) => c.body.text);

describe("a run past RUN_MAX_MESSAGES on Telegram", () => {
  it("shows the messages before the cap, not the final one past it, and the chat's next run answers", async () => {
    const chatId = "-79101";
    // `final <interim> | <final>`: a message.completed, then run.completed carrying another message.
    expect((await sayOnTelegram(chat.webhookUrl, chat.secretToken, chatId, "final first answer | second answer")).status).toBe(200);
    const ctx = await waitFor(() => chat.runner.contexts.find((c) => c.input.text === "final first answer | second answer"), 15_000, "the run");
    const run = await chat.host.waitForRun(ctx.run_id);
    expect([run.status, run.error?.code]).toEqual(["failed", "runner.too_many_messages"]);
    // The next run's reply waits for this one's to settle: once it is sent, this one's sends are all made.
    expect((await sayOnTelegram(chat.webhookUrl, chat.secretToken, chatId, "hello")).status).toBe(200);
    await waitFor(() => sentTo(chatId).includes("echo: hello"), 15_000, "the next run's answer");
    expect(sentTo(chatId)).toEqual(["first answer", "echo: hello"]);
  });
});
