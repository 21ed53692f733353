import { describe, expect, it } from "vitest";
import { type FakeReply, type PlatformCall, sayOnTelegram, startChatRunner, waitFor } from "../support/fake-platform";
import { useTelegramBotHost } from "../support/telegram-bot-host";

/**
 * README (Delivery): "elsewhere the final text is not posted again when a streamed send of that very text may be in
 * the chat". An edit of the streamed message to the final text that got no answer may have landed just as well: the
 * chat may already show the final text, so it must not be posted beside it as a new message.
 */
const BOT_TOKEN = "123456:TEST-telegram-bot-token-editmaybe";
const SECRET_TOKEN = "tg-secret-token-edit-maybe-0123";
/** Chats whose editMessageText is applied, then the connection drops before Telegram answers. */
const droppingEdits = new Set<string>(["-100881"]);
/** What each message shows now, as the fake Telegram applied it. */
const shown = new Map<number, { chat: string; text: string }>();

let nextMessageId = 500;

function telegramApi(call: PlatformCall): FakeReply {
  const m = /^\/bot([^/]+)\/(.+)$/.exec(call.path);
  if (!m || m[1] !== BOT_TOKEN) return { status: 401, json: { ok: false, error_code: 401, description: "Unauthorized" } };
  const chat = String(call.body?.chat_id);
  if (m[2] === "sendMessage") {
    const id = ++nextMessageId;
    shown.set(id, { chat, text: call.body.text });
    return { json: { ok: true, result: { message_id: id } } };
  }
  if (m[2] === "editMessageText") {
    shown.set(call.body.message_id, { chat, text: call.body.text });
    if (droppingEdits.has(chat)) return { drop: true };
    return { json: { ok: true, result: { message_id: call.body.message_id } } };
  }
  return { status: 404, json: { ok: false, error_code: 404, description: "Not Found" } };
}

const bot = useTelegramBotHost({
  agentId: "edit-maybe",
  botToken: BOT_TOKEN,
  secretToken: SECRET_TOKEN,
  api: telegramApi,
  vars: { DELIVERY_EDIT_INTERVAL_MS: "300", DELIVERY_RETRY_BASE_MS: "100" },
  startRunner: () => startChatRunner("edit-maybe"),
});

describe("a streamed message's edit to the final text that got no answer", () => {
  it("is not followed by the final text posted again as a new message (the chat would show the answer twice)", async () => {
    expect((await sayOnTelegram(bot.webhookUrl, SECRET_TOKEN, "-100881", "stream alpha beta")).status).toBe(200);
    const runId = (await waitFor(() => bot.runner.contexts.find((c) => c.conversation.conversation_id === "-100881")))!.run_id;
    await bot.host.waitForRun(runId);
    // Every edit of the final text was applied: the streamed message shows it.
    await waitFor(() => [...shown.values()].some((s) => s.chat === "-100881" && s.text === "alpha beta"), 15_000, "the final edit");
    // Give the reply time to settle (its edits' retries, then whatever follows them).
    await waitFor(async () => (await bot.host.query("SELECT 1 FROM event_log WHERE run_id = ? AND event_type = 'delivery.failed' AND json_extract(data_json, '$.will_retry') = 0 AND json_extract(data_json, '$.operation') = 'edit'", [runId])).length >= 2, 20_000, "the edits given up");
    await new Promise((r) => setTimeout(r, 1_000));
    const showing = [...shown.values()].filter((s) => s.chat === "-100881" && s.text === "alpha beta");
    expect(showing, "messages in the chat showing the final answer").toHaveLength(1);
  });
});
