import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sayOnTelegram, waitFor } from "../support/fake-platform";
import { startTelegramChat } from "../support/telegram-chat";

/**
 * A reply's delivery records are written off its path, one batch after another, each tried again after the database's
 * pauses. A database that hangs (every write out to its query timeout) made the session wait for all of them, ~5 s a
 * batch here and over a minute each in production, holding the alarm that settles it past its budget. Now the writes
 * stop at the reply's settle bound (plus as long again, at most 10 s): the rest is given up and said once.
 */
let tg: Awaited<ReturnType<typeof startTelegramChat>>;
beforeAll(async () => {
  tg = await startTelegramChat("trail-bound", { captureLogs: true, vars: { DELIVERY_SETTLE_TIMEOUT_MS: "1000", DB_QUERY_TIMEOUT_MS: "1000" } });
});
afterAll(async () => {
  await tg?.dispose();
});

describe("a reply whose delivery records the database never takes", () => {
  it("is settled by its bound: the records left are given up, said in one line, and every part still reaches the chat", async () => {
    const chat = "-100881";
    // Every write of the trail is held past the query timeout (1 s): each batch takes 4 attempts and the pauses (~5 s).
    tg.host.databaseOutage({ delayMs: 30_000, matching: "delivery.attempted", queries: 1000 });
    expect((await sayOnTelegram(tg.webhookUrl, tg.secretToken, chat, "long 20000")).status).toBe(200);
    const runId = await waitFor(() => tg.runner.contexts.find((c) => c.input.text === "long 20000")?.run_id);
    await tg.host.waitForRun(runId);
    const ended = Date.now();
    const parts = () => tg.fake.callsTo(/\/sendMessage$/).filter((c) => String(c.body.chat_id) === chat);
    await waitFor(() => parts().length === 5, 10_000, "the answer's five parts");
    // Five batches (one a part) would hold it ~25 s; the bound (1 s settle, 1 s more, a write in flight ending within
    // 1 s) lets go within a few: by then every batch is accounted for, given up or not written after its tries.
    const givenUp = new RegExp(`run ${runId}: (\\d+) delivery record write\\(s\\) given up: the database had not taken them by the reply's settle bound`);
    const accounted = () => {
      const logs = tg.host.logs();
      const notWritten = logs.split(`run ${runId}: delivery record not written`).length - 1;
      return notWritten + Number(givenUp.exec(logs)?.[1] ?? 0);
    };
    await waitFor(() => accounted() >= 5, 12_000, "every batch of the trail given up or not written");
    expect(Date.now() - ended).toBeLessThan(12_000);
    expect(givenUp.test(tg.host.logs())).toBe(true);
    tg.host.databaseOutage(false);
  });
});
