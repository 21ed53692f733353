import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sayOnTelegram, waitFor } from "../support/fake-platform";
import { startTelegramChat } from "../support/telegram-chat";

/** A reply abandoned at its settle timeout records only the calls that reached the platform. */
/** Chats whose sendMessage Telegram answers 429 with this retry_after (seconds), every time. */
const throttled = new Map<string, number>();
let tg: Awaited<ReturnType<typeof startTelegramChat>>;
beforeAll(async () => {
  tg = await startTelegramChat("deliv", { vars: { DELIVERY_SETTLE_TIMEOUT_MS: "1500" }, throttled });
});
afterAll(async () => {
  await tg?.dispose();
});

describe("Telegram: a reply abandoned at its settle timeout while it waits out a rate limit", () => {
  it("records only the attempts that reached the platform: no 'attempted' for a call that was never made", async () => {
    throttled.set("-100555", 4);
    expect((await sayOnTelegram(tg.webhookUrl, tg.secretToken, "-100555", "abandon me")).status).toBe(200);
    const runId = await waitFor(() => tg.runner.contexts.find((c) => c.input.text === "abandon me")?.run_id);
    await tg.host.waitForRun(runId);
    await waitFor(async () => (await tg.trail(runId)).some((r) => r.code === "settle_timeout"), 10_000, "the settle timeout record");
    await new Promise((r) => setTimeout(r, 1000));
    const calls = tg.fake.callsTo(/\/sendMessage$/).filter((c) => String(c.body.chat_id) === "-100555");
    const records = await tg.trail(runId);
    expect(calls).toHaveLength(1);
    // One call reached Telegram: the trail must show one attempt, not a second "attempted" for the abandoned one.
    expect(records.map((r) => [r.type, r.operation, r.attempt ?? null, r.code ?? null])).toEqual([
      ["delivery.attempted", "send", 1, null],
      ["delivery.failed", "send", 1, "rate_limited"],
      ["delivery.failed", "settle", null, "settle_timeout"],
    ]);
  });
});
