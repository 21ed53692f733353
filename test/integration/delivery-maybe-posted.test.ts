import { describe, expect, it } from "vitest";
import { type FakeReply, type PlatformCall, sayOnTelegram, startChatRunner, waitFor } from "../support/fake-platform";
import { useTelegramBotHost } from "../support/telegram-bot-host";

/**
 * A send that may have been posted (no answer came, or a 500/504) is not made
 * again outside Lark. A streamed send that failed so may already show the
 * final text: that text is not posted a second time. A final text that
 * differs still goes out, so the answer is never lost.
 */
const BOT_TOKEN = "123456:TEST-telegram-bot-token-maybe";
const SECRET_TOKEN = "tg-secret-token-maybe-posted";
const droppingChats = new Set<string>();
/** Chats whose first sendMessage is posted, then answered 504 by Telegram's front (its upstream answered too late). */
const gatewayTimeoutChats = new Set<string>();

let nextMessageId = 500;

function telegramApi(call: PlatformCall): FakeReply {
  const m = /^\/bot([^/]+)\/(.+)$/.exec(call.path);
  if (!m || m[1] !== BOT_TOKEN) return { status: 401, json: { ok: false, error_code: 401, description: "Unauthorized" } };
  const chat = String(call.body?.chat_id);
  // The message is posted (the fake records it), then the connection drops before Telegram answers.
  if (m[2] === "sendMessage" && droppingChats.delete(chat)) return { drop: true };
  if (m[2] === "sendMessage" && gatewayTimeoutChats.delete(chat)) return { status: 504, json: null };
  if (m[2] === "sendMessage") return { json: { ok: true, result: { message_id: ++nextMessageId } } };
  if (m[2] === "editMessageText") return { json: { ok: true, result: { message_id: call.body.message_id } } };
  return { status: 404, json: { ok: false, error_code: 404, description: "Not Found" } };
}

const bot = useTelegramBotHost({ agentId: "maybe-posted", botToken: BOT_TOKEN, secretToken: SECRET_TOKEN, api: telegramApi, startRunner: () => startChatRunner("maybe-posted") });

const sendsTo = (chat: string) => bot.fake.callsTo(/\/sendMessage$/).filter((c) => String(c.body.chat_id) === chat);

/** A message from Ada in `chat`; answers the run's id once the run has ended and its reply had time to go out. */
async function chatRun(chat: string, text: string) {
  expect((await sayOnTelegram(bot.webhookUrl, SECRET_TOKEN, chat, text)).status).toBe(200);
  const runId = (await waitFor(() => bot.runner.contexts.find((c) => c.conversation.conversation_id === chat)))!.run_id;
  await bot.host.waitForRun(runId);
  // No record marks that nothing more will be sent: the final text goes out within an edit interval (1 s) of the end.
  await new Promise((r) => setTimeout(r, 2_000));
  return runId;
}

describe("a send that may have been posted", () => {
  it("is not posted again when the final text is the very text of the streamed send", async () => {
    droppingChats.add("-100777");
    await chatRun("-100777", "stream single");
    expect(sendsTo("-100777").map((c) => c.body.text)).toEqual(["single"]);
  });

  it("still lets a different final text go out, so the answer is never lost", async () => {
    droppingChats.add("-100779");
    await chatRun("-100779", "stream one two");
    expect(sendsTo("-100779").map((c) => c.body.text)).toEqual(["one", "one two"]);
  });

  it("answered 504 Gateway Timeout, is not sent again", async () => {
    gatewayTimeoutChats.add("-100778");
    const runId = await chatRun("-100778", "posted once");
    expect(sendsTo("-100778").map((c) => c.body.text)).toEqual(["echo: posted once"]);
    const failed = await bot.host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE run_id = ? AND event_type = 'delivery.failed'", [runId]);
    expect(failed.map((r) => JSON.parse(r.data_json))).toEqual([expect.objectContaining({ status: 504, will_retry: false })]);
  });
});
