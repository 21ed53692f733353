import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sayOnTelegram, waitFor } from "../support/fake-platform";
import { startTelegramChat } from "../support/telegram-chat";

/**
 * A platform's rate limit asking for a wait past any whole number a reader's integer holds exactly (2^53 − 1 ms) is no
 * wait: the reply is given up on at once (longer than DELIVERY_MAX_RETRY_AFTER_MS), and the trail and the bot's note
 * record its `retry_after_ms` as null, as for a platform that named none, never as `1e+23` or a number read inexactly.
 */
/** Chats whose sendMessage Telegram answers 429 with this retry_after (seconds), every time. */
const throttled = new Map<string, number>();
let tg: Awaited<ReturnType<typeof startTelegramChat>>;
beforeAll(async () => {
  tg = await startTelegramChat("endless", { throttled });
});
afterAll(async () => {
  await tg?.dispose();
});

/** A message to `chat`, whose answer Telegram refuses (throttled): its run, and the first delivery.failed of its answer. */
async function firstFailure(chat: string) {
  expect((await sayOnTelegram(tg.webhookUrl, tg.secretToken, chat, `endless ${chat}`)).status).toBe(200);
  const runId = await waitFor(() => tg.runner.contexts.find((c) => c.input.text === `endless ${chat}`)?.run_id);
  const failed = await waitFor(async () => (await tg.trail(runId)).find((r) => r.type === "delivery.failed"), 10_000, "the failure");
  return { runId, failed };
}

describe("Telegram: a 429 whose retry_after is past any whole number of milliseconds", () => {
  // 1e20 s is 1e23 ms (JSON's `1e+23`); 9007199254741 s is a whole number of ms just past 2^53 − 1.
  it.each([
    ["-100571", 1e20],
    ["-100572", 9_007_199_254_741],
  ])("is given up on at once, recorded with retry_after_ms null (chat %s, %d s)", async (chat, seconds) => {
    throttled.set(chat, seconds);
    const { runId, failed } = await firstFailure(chat);
    expect(failed).toMatchObject({ operation: "send", attempt: 1, status: 429, code: "rate_limited", will_retry: false, retry_in_ms: null });
    expect(failed).toHaveProperty("retry_after_ms", null);
    const note = await waitFor(async () => {
      const n = (await tg.host.admin("GET", `/v1/admin/bots/${tg.botId}`)).body.last_delivery_failure;
      return n?.run_id === runId && n;
    }, 10_000, "the bot's note");
    expect(note).toHaveProperty("retry_after_ms", null);
    expect(tg.fake.callsTo(/\/sendMessage$/).filter((c) => String(c.body.chat_id) === chat)).toHaveLength(1);
  });
});

describe("Telegram: a 429 whose retry_after is negative or a fraction of a millisecond", () => {
  it("negative: no wait named, so the reply backs off as for a platform that named none (never retried at once, never recorded negative)", async () => {
    const chat = "-100573";
    throttled.set(chat, -5);
    const { failed } = await firstFailure(chat);
    expect(failed).toMatchObject({ attempt: 1, status: 429, code: "rate_limited", will_retry: true, retry_after_ms: null });
    expect(failed.retry_in_ms).toBeGreaterThan(0);
  });

  it("a fraction: the wait rounded up to whole milliseconds, recorded as waited", async () => {
    const chat = "-100574";
    throttled.set(chat, 0.0015);
    const { failed } = await firstFailure(chat);
    expect(failed).toMatchObject({ attempt: 1, status: 429, will_retry: true, retry_after_ms: 2, retry_in_ms: 2 });
  });

  it("a whole number of milliseconds given as a fraction of seconds: that wait, not one more (2.007 s is 2007 ms, not ceil(2007.0000000000002))", async () => {
    const chat = "-100575";
    throttled.set(chat, 2.007);
    const { failed } = await firstFailure(chat);
    expect(failed).toMatchObject({ attempt: 1, status: 429, will_retry: true, retry_after_ms: 2007, retry_in_ms: 2007 });
  });
});
