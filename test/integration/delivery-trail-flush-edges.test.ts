import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sayOnTelegram, waitFor } from "../support/fake-platform";
import { startTelegramChat } from "../support/telegram-chat";

/**
 * The edges of a reply's trail flush bound (its settle bound, and as long again: here 1 s and 1 s more).
 * - A record write waiting out its retry pause when the bound passes: the pause (10 s here) ended only on its own
 *   time, holding the session, and the alarm settling it, that long past the bound.
 * - A call in flight when the reply was abandoned at its settle bound, answered after the flush bound: the message is
 *   in the chat, but its records were given up with no try and nothing said, though nothing waits for them.
 */
const PAUSE_MS = 10_000;
let tg: Awaited<ReturnType<typeof startTelegramChat>>;
beforeAll(async () => {
  tg = await startTelegramChat("trail-edges", { captureLogs: true, vars: { DELIVERY_SETTLE_TIMEOUT_MS: "1000", DB_WRITE_RETRY_PAUSES_MS: String(PAUSE_MS) } });
});
afterAll(async () => {
  await tg?.dispose();
});

describe("a reply's delivery record waiting out a retry pause at its flush bound", () => {
  it("is given up at the bound, not at the pause's end", async () => {
    const chat = "-100771";
    // Every write of the trail is refused at once: the first attempt fails, then the pause (10 s) begins.
    tg.host.databaseOutage({ matching: "delivery.attempted", queries: 1000 });
    try {
      expect((await sayOnTelegram(tg.webhookUrl, tg.secretToken, chat, "pause me")).status).toBe(200);
      const runId = await waitFor(() => tg.runner.contexts.find((c) => c.input.text === "pause me")?.run_id);
      await tg.host.waitForRun(runId);
      const ended = Date.now();
      const givenUp = `run ${runId}: 1 delivery record write(s) given up`;
      await waitFor(() => tg.host.logs().includes(givenUp), PAUSE_MS + 5_000, "the record given up");
      // Bound: 1 s settle + 1 s more. The pause ending on its own would be ~10 s after the send.
      expect(Date.now() - ended).toBeLessThan(5_000);
    } finally {
      // The writes it has not failed yet are let through again.
      tg.host.databaseOutage({ queries: 0 });
    }
  });
});

describe("a call in flight when its reply was abandoned, answered after the flush bound", () => {
  it("still has its records written (nothing waits for them), not dropped unsaid", async () => {
    const chat = "-100772";
    // Settle bound 1 s after the run, flush bound 1 s later; the send is answered after 5 s, well within its timeout (10 s).
    tg.slowSends.set(chat, 5_000);
    expect((await sayOnTelegram(tg.webhookUrl, tg.secretToken, chat, "late answer")).status).toBe(200);
    const runId = await waitFor(() => tg.runner.contexts.find((c) => c.input.text === "late answer")?.run_id);
    await tg.host.waitForRun(runId);
    await waitFor(async () => (await tg.trail(runId)).some((r) => r.code === "settle_timeout"), 5_000, "the settle timeout record");
    const succeeded = async () => (await tg.trail(runId)).some((r) => r.type === "delivery.succeeded" && r.operation === "send");
    await waitFor(succeeded, 10_000, "the late send's success recorded");
    expect(tg.fake.callsTo(/\/sendMessage$/).filter((c) => String(c.body.chat_id) === chat)).toHaveLength(1);
  });
});
