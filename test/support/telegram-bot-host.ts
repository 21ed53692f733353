import { afterAll, beforeAll } from "vitest";
import type { FakePlatform } from "./chat-host";
import { addTelegramBot, sayOnTelegram, startFakePlatform, type FakeReply, type PlatformCall } from "./fake-platform";
import { startTestHost, type TestHost } from "./host";

/** A Bot API that takes every call: a send (a message or a document) gets a new message id, an edit is applied. */
export function telegramSendsTaken(): (call: PlatformCall) => FakeReply {
  let nextId = 100;
  return (call) => {
    if (/\/send(Message|Document)$/.test(call.path)) return { json: { ok: true, result: { message_id: ++nextId } } };
    if (call.path.endsWith("/editMessageText")) return { json: { ok: true, result: { message_id: call.body.message_id } } };
    return { json: { ok: true, result: true } };
  };
}

/** A Bot API that answers every call as a message sent: a sendMessage with the message as posted, any other with a new message id. */
export function telegramCallsAnsweredAsSent(): (call: PlatformCall) => FakeReply {
  let nextId = 100;
  return (call) => {
    if (call.path.endsWith("/sendMessage")) return { json: { ok: true, result: { message_id: ++nextId, chat: { id: Number(call.body.chat_id) }, text: call.body.text } } };
    return { json: { ok: true, result: { message_id: ++nextId } } };
  };
}

/**
 * A host (`vars` over the test defaults; its logs kept with `captureLogs`) with one Telegram bot (its tokens as given,
 * or made from `agentId`) on a fake Bot API answered by `api` (`telegramSendsTaken` unless given), bound at bot scope
 * to agent `agentId` of the runner `startRunner` starts: the set-up of the chat tests that bring a Bot API or a runner
 * of their own. Call it once at a file's top level: it registers the file's beforeAll and afterAll, and each call has
 * its own state.
 */
export function useTelegramBotHost<R extends { url: string; runnerId: () => string; close(): Promise<void> }>(opts: {
  agentId: string;
  startRunner: () => Promise<R>;
  api?: (call: PlatformCall) => FakeReply | Promise<FakeReply>;
  vars?: Record<string, string>;
  botName?: string;
  botToken?: string;
  secretToken?: string;
  captureLogs?: boolean;
}) {
  const botToken = opts.botToken ?? `123456:TEST-telegram-bot-token-${opts.agentId}`;
  const secretToken = opts.secretToken ?? `tg-secret-token-${opts.agentId}-0123`;
  // Filled in by beforeAll: the tests read these fields only once it has run.
  const parts = {} as { host: TestHost; fake: FakePlatform; runner: R; botId: string; webhookUrl: string };

  beforeAll(async () => {
    parts.fake = await startFakePlatform(opts.api ?? telegramSendsTaken());
    parts.runner = await opts.startRunner();
    parts.host = await startTestHost({ vars: opts.vars, captureLogs: opts.captureLogs });
    const bot = await addTelegramBot(parts.host, { apiBaseUrl: parts.fake.url, botToken, secretToken, name: opts.botName }, { runner: parts.runner, agentId: opts.agentId });
    parts.botId = bot.botId;
    parts.webhookUrl = bot.webhookUrl;
  });
  afterAll(async () => {
    await parts.host?.dispose();
    await parts.runner?.close();
    await parts.fake?.close();
  });

  return Object.assign(parts, {
    secretToken,
    /** Ada's `text` in `chat`, as Telegram delivers it to the bot's webhook. */
    say: (chat: string, text: string) => sayOnTelegram(parts.webhookUrl, secretToken, chat, text),
    /** The texts the bot sent to `chat`, in order. */
    sentTo: (chat: string) => parts.fake.callsTo(/\/sendMessage$/).filter((c) => String(c.body.chat_id) === chat).map((c) => c.body.text as string),
  });
}
