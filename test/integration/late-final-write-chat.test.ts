import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../support/fake-platform";
import { startTelegramChat } from "../support/telegram-chat";

/**
 * A chat run's final write (reply + run.completed) is applied but answered late, and the host's own end writes
 * (host failure, then lost run) are refused until it has landed. The lost-run end finds the run completed: it
 * ends nothing, and the run's kept reply gets the entries the run recorded, so the user gets the answer.
 */
let tg: Awaited<ReturnType<typeof startTelegramChat>>;
beforeAll(async () => {
  tg = await startTelegramChat("late-chat", { vars: { DB_QUERY_TIMEOUT_MS: "2000", RUN_WATCHDOG_INTERVAL_MS: "1000" } });
});
afterAll(async () => {
  await tg?.dispose();
});

describe("a chat run whose final write was applied late while the host's own end writes were refused", () => {
  it("the user still gets the reply the run completed with", { timeout: 30_000 }, async () => {
    const chat = "-1007799";
    tg.host.databaseOutage({ delayMs: 3_000, matching: "echo: late-late-final" });
    const res = await fetch(tg.webhookUrl, {
      method: "POST",
      headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": tg.secretToken },
      body: JSON.stringify({ update_id: 5091, message: { message_id: 50910, date: Math.floor(Date.now() / 1000), chat: { id: Number(chat), type: "group", title: "g" }, from: { id: 42, is_bot: false, first_name: "Ada" }, text: "late-late-final" } }),
    });
    expect(res.status).toBe(200);
    tg.host.databaseOutage({ queries: 1000, matching: "changes() = 1" });
    await new Promise((r) => setTimeout(r, 4_500));
    tg.host.databaseOutage({ queries: 0 });
    await waitFor(() => tg.fake.callsTo(/\/sendMessage$/).some((c) => String(c.body.chat_id) === chat), 15_000, "the reply in the chat");
    const rows = await tg.host.query<{ run_id: string; status: string }>("SELECT run_id, status FROM run WHERE conversation_id = ?", [chat]);
    const sends = tg.fake.callsTo(/\/sendMessage$/).filter((c) => String(c.body.chat_id) === chat).map((c) => c.body.text);
    expect({ status: rows[0]?.status, sends }).toEqual({ status: "completed", sends: ["echo: late-late-final"] });
  });
});
