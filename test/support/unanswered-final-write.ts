import type { FakePlatform } from "./chat-host";
import { readSse, type TestHost } from "./host";

/**
 * The drill of the final-write-unanswered tests, on a host with DB_QUERY_TIMEOUT_MS 2000: a run's final write (the
 * batch holding `reply`) is held past the Worker's 2 s timeout, then applied; `letRunEnd` sends the run to it, and
 * `gapMs` later the host-failure end that follows is held too, so it reaches the database after the final batch.
 */
export async function holdFinalWriteThenHostFailureEnd(host: TestHost, reply: string, letRunEnd: () => Promise<void>, gapMs: number) {
  host.databaseOutage({ delayMs: 3_000, matching: reply });
  await letRunEnd();
  await new Promise((r) => setTimeout(r, gapMs));
  host.databaseOutage({ delayMs: 1_500, matching: "the host failed to record the run" });
}

/** Run `runId`'s stream, opened before the drill (`release` lets the run write its end): what it read, and the run as it ended. */
export async function streamOfUnansweredFinalWrite(host: TestHost, runId: string, reply: string, release: () => void) {
  const stream = fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` } });
  await new Promise((r) => setTimeout(r, 300));
  await holdFinalWriteThenHostFailureEnd(host, reply, async () => release(), 500);
  const sse = await readSse(await stream);
  return { sse, run: await host.waitForRun(runId) };
}

/**
 * Ada's `text` in Telegram group `chat` (update `updateId`) to `bot`, whose run ends with the drill: the webhook's
 * status, and once all has settled, the run's status and what the fake Bot API was asked to send to the chat.
 */
export async function chatOfUnansweredFinalWrite(bot: { host: TestHost; fake: FakePlatform; webhookUrl: string; secretToken: string }, said: { chat: string; text: string; updateId: number; reply: string }) {
  const { host, fake } = bot;
  const { chat, text, updateId } = said;
  let webhookStatus = 0;
  await holdFinalWriteThenHostFailureEnd(host, said.reply, async () => {
    const res = await fetch(bot.webhookUrl, {
      method: "POST",
      headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": bot.secretToken },
      body: JSON.stringify({ update_id: updateId, message: { message_id: updateId * 10, date: Math.floor(Date.now() / 1000), chat: { id: Number(chat), type: "group", title: "g" }, from: { id: 42, is_bot: false, first_name: "Ada" }, text } }),
    });
    webhookStatus = res.status;
  }, 1_000);
  await new Promise((r) => setTimeout(r, 6_000));
  const rows = await host.query<{ status: string }>("SELECT status FROM run WHERE conversation_id = ?", [chat]);
  const sends = fake.callsTo(/\/sendMessage$/).filter((c) => String(c.body.chat_id) === chat).map((c) => c.body.text);
  return { webhookStatus, status: rows[0]?.status, sends };
}
