import { expect } from "vitest";
import { startTestHost, type TestHost } from "./host";
import { startChatRunner, startFakePlatform, telegramBotApi } from "./fake-platform";

/**
 * A host with one Telegram bot on a fake Bot API (`telegramBotApi`; chats in `throttled` answer 429) bound to a chat
 * runner: the set-up of the delivery tests that drive one bot through its webhook. A file whose path (as getFile names
 * it: `photos/<file_id>.jpg`) a test puts in `slowFiles` is downloaded only after that many ms (a large video, a slow link);
 * a sendMessage to a chat a test puts in `slowSends` is answered only after that many ms.
 */
export async function startTelegramChat(name: string, opts: { vars?: Record<string, string>; throttled?: ReadonlyMap<string, number>; captureLogs?: boolean } = {}) {
  const botToken = `123456:TEST-telegram-bot-token-${name}`;
  const secretToken = `tg-secret-token-${name}-0123`;
  const api = telegramBotApi(botToken, opts.throttled);
  const slowFiles = new Map<string, number>();
  const slowSends = new Map<string, number>();
  const fake = await startFakePlatform(async (call) => {
    const delayMs = call.path.startsWith("/file/") ? slowFiles.get(call.path.replace(/^\/file\/bot[^/]+\//, "")) : call.path.endsWith("/sendMessage") ? slowSends.get(String(call.body?.chat_id)) : undefined;
    if (delayMs) await new Promise((r) => setTimeout(r, delayMs));
    return api(call);
  });
  const runner = await startChatRunner(name);
  const host: TestHost = await startTestHost({ vars: opts.vars, captureLogs: opts.captureLogs });
  const created = await host.admin("POST", "/v1/admin/bots", { platform: "telegram", name: "tg", api_base_url: fake.url, credentials: { bot_token: botToken, secret_token: secretToken } });
  expect(created.status).toBe(201);
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: name, scope: { type: "bot", id: created.body.bot_id }, eventTypes: ["message.received"] });
  return {
    host,
    fake,
    runner,
    botId: created.body.bot_id as string,
    webhookUrl: created.body.webhook_url as string,
    slowFiles,
    slowSends,
    secretToken,
    /** The run's delivery trail, in order: each record's type and data. */
    trail: async (runId: string) =>
      (await host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type LIKE 'delivery.%' ORDER BY seq", [runId])).map((r) => ({ type: r.event_type, ...JSON.parse(r.data_json) })),
    async dispose() {
      await host.dispose();
      await runner.close();
      await fake.close();
    },
  };
}
