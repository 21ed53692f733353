import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { addTelegramBot, startChatRunner, startFakePlatform, telegramBotApi, waitFor } from "../support/fake-platform";

/**
 * README: "What the host could not give back as it was sent is refused, never stored altered: ... an event's text,
 * names and types ... with a NUL or an unpaired surrogate". An API event carrying one is a 400; a chat platform's
 * update carrying one (JSON may hold "\u0000" or "\ud800") was recorded anyway: the runner was given the text as
 * sent while history.page, the Transcript and the actor's name gave back another one (cut at the NUL, or U+FFFD),
 * and a runner answering with the user's words (a quote, an echo) had its answer dropped, so the user got the
 * failure notice. Whatever the host does with such text, every party must see the same text, and quoting it back
 * must reach the chat.
 */
const BOT_TOKEN = "123456:TEST-telegram-bot-token-abcdefgh";
const SECRET_TOKEN = "tg-secret-token-0123456789";
let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startChatRunner>>;
let webhookUrl: string;
let botId: string;

beforeAll(async () => {
  fake = await startFakePlatform(telegramBotApi(BOT_TOKEN));
  runner = await startChatRunner("tg-unstorable");
  host = await startTestHost();
  ({ webhookUrl, botId } = await addTelegramBot(host, { apiBaseUrl: fake.url, botToken: BOT_TOKEN, secretToken: SECRET_TOKEN, name: "tg" }, { runner, agentId: "tg-agent" }));
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

let updateId = 7000;
/** A Telegram update whose text and sender name are given as JSON string contents (escapes and all). */
async function say(chat: string, textJson: string, nameJson = "Ada") {
  const id = ++updateId;
  const body = `{"update_id":${id},"message":{"message_id":${id},"date":${Math.floor(Date.now() / 1000)},"chat":{"id":${chat},"type":"private"},"from":{"id":42,"is_bot":false,"first_name":"${nameJson}"},"text":"${textJson}"}}`;
  const res = await fetch(webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": SECRET_TOKEN }, body });
  expect(res.status).toBe(200);
}

describe("a platform message the host cannot store as sent", () => {
  for (const [name, chat, textJson, nameJson] of [
    ["a NUL", "601", "before\\u0000after", "A\\u0000da"],
    ["an unpaired surrogate", "602", "half \\ud83d of an emoji", "Ada \\udc00"],
  ] as const) {
    it(`with ${name}: the runner, history and the reply all see one text`, async () => {
      await say(chat, textJson, nameJson);
      const [send] = await waitFor(() => fake.calls.filter((c) => String(c.body?.chat_id) === chat).length > 0 && fake.calls.filter((c) => String(c.body?.chat_id) === chat), 15_000, "the reply");
      const ctx = runner.contexts.find((c) => c.conversation.conversation_id === chat)!;
      const transcript = (await host.admin("GET", `/v1/conversations/transcript?conversation_id=${chat}&bot_id=${botId}`)).body.items as { role: string; content: string; metadata: any }[];
      const user = transcript.find((i) => i.role === "user")!;
      // What history gives back is what the runner was given.
      expect(user.content).toBe(ctx.input.text);
      expect(user.metadata.actor_name).toBe(ctx.actor.actor_name);
      const recorded = (await host.admin("GET", `/v1/events/${encodeURIComponent(ctx.event.event_id)}`)).body;
      expect(recorded.actor_name).toBe(ctx.actor.actor_name);
      // Nothing of the message was lost at the NUL.
      expect(ctx.input.text).toMatch(/after|of an emoji$/);
      // The runner's echo of the user's words is the answer, not the failure notice.
      expect(send.body.text).toBe(`echo: ${ctx.input.text}`);
    });
  }
});
