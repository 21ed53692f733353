import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sayOnTelegram, waitFor } from "../support/fake-platform";
import { startTelegramChat } from "../support/telegram-chat";

/**
 * A Telegram reply to one of the bot's own answers takes the answer from the host's delivery record
 * (src/platforms/delivered-reply.ts): its words as the transcript keeps them and its files as the same artifacts.
 */
let chat: Awaited<ReturnType<typeof startTelegramChat>>;
/** The bot as Telegram names it in a replied message: its id is its token's prefix. */
const OURSELVES = { id: 123456, is_bot: true, first_name: "Test" };
let updateId = 880_000;

beforeAll(async () => {
  chat = await startTelegramChat("delivered-reply");
});
afterAll(async () => {
  await chat?.dispose();
});

/** Ada replying in `chatId` to the bot's message `messageId` (shown as `shown`). */
function replyTo(chatId: string, messageId: number, shown: Record<string, unknown>, text: string): Promise<Response> {
  const id = ++updateId;
  const where = { id: Number(chatId), type: "supergroup" };
  const message = { message_id: id, date: Math.floor(Date.now() / 1000), chat: where, from: { id: 42, is_bot: false, first_name: "Ada" }, text, reply_to_message: { message_id: messageId, from: OURSELVES, date: 1, chat: where, ...shown } };
  return fetch(chat.webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": chat.secretToken }, body: JSON.stringify({ update_id: id, message }) });
}

const contextOf = (text: string) => waitFor(() => chat.runner.contexts.find((c) => c.input.text === text), 15_000, `the run of "${text}"`);
const recorded = (messageId: number) =>
  waitFor(async () => (await chat.host.query("SELECT 1 FROM event_log WHERE event_type = 'delivery.succeeded' AND json_extract(data_json, '$.message_id') = ?", [String(messageId)])).length > 0, 15_000, `the trail of ${messageId}`);

describe("a reply to the bot's own answer, from the host's record", () => {
  it("brings the files the answer named in its content (an upload shown as an image element), not only those announced before it", async () => {
    const chatId = "-79001";
    expect((await sayOnTelegram(chat.webhookUrl, chat.secretToken, chatId, "upload chart.png 64")).status).toBe(200);
    const sent = await waitFor(() => chat.fake.callsTo(/\/sendMessage$/).find((c) => String(c.body.chat_id) === chatId && c.reply), 15_000, "the answer's text");
    const textId = (sent.reply!.json as { result: { message_id: number } }).result.message_id;
    const runId = (await contextOf("upload chart.png 64")).run_id;
    const [made] = await chat.host.query<{ artifact_id: string }>("SELECT artifact_id FROM artifact WHERE run_id = ?", [runId]);
    await recorded(textId);
    expect((await replyTo(chatId, textId, { text: "here is chart.png" }, "make it brighter")).status).toBe(200);
    const ctx = await contextOf("make it brighter");
    expect(ctx.event.data.reply_to).toMatchObject({ message_id: textId, text: "here is chart.png", unavailable: null });
    expect(ctx.input.attachments).toEqual([expect.objectContaining({ artifact_id: made.artifact_id, name: "chart.png" })]);
    expect(ctx.event.data.reply_to.attachments).toEqual(ctx.input.attachments);
  });
});
