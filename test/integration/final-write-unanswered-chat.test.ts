import { describe, expect, it } from "vitest";
import { type FakeReply, type PlatformCall, startChatRunner } from "../support/fake-platform";
import { useTelegramBotHost } from "../support/telegram-bot-host";
import { chatOfUnansweredFinalWrite } from "../support/unanswered-final-write";

/**
 * Same defect as final-write-unanswered.test.ts, seen by a chat user: the run's final write (reply +
 * run.completed) is applied but its answer is late; the host's fallback end finds the run already
 * completed and records nothing, and the reply in progress never hears the final entries nor a notice.
 */
let nextMessageId = 100;

function telegramApi(call: PlatformCall): FakeReply {
  if (call.path.endsWith("/sendMessage")) return { json: { ok: true, result: { message_id: ++nextMessageId, chat: { id: Number(call.body.chat_id) }, text: call.body.text } } };
  if (call.path.endsWith("/editMessageText")) return { json: { ok: true, result: { message_id: call.body.message_id, text: call.body.text } } };
  return { json: { ok: true, result: true } };
}

const bot = useTelegramBotHost({ agentId: "tg-agent", botName: "tg", api: telegramApi, vars: { DB_QUERY_TIMEOUT_MS: "2000" }, startRunner: () => startChatRunner("probe-chat") });

describe("a chat run whose final write was applied but answered late", () => {
  it("the user still gets the reply the run completed with (or at least a notice)", async () => {
    const said = { chat: "-1007700", text: "probe-late-final", updateId: 5001, reply: "echo: probe-late-final" };
    const { webhookStatus, status, sends } = await chatOfUnansweredFinalWrite(bot, said);
    expect(webhookStatus).toBe(200);
    expect({ status, sends }).toEqual({ status: "completed", sends: ["echo: probe-late-final"] });
  });
});
