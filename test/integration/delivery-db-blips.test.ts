import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sayOnTelegram, waitFor } from "../support/fake-platform";
import { startTelegramChat } from "../support/telegram-chat";

/** Delivery while the database blips: the trail's records and the reply's bot are asked for again until it answers. */
let tg: Awaited<ReturnType<typeof startTelegramChat>>;
beforeAll(async () => {
  tg = await startTelegramChat("delivery-db", { captureLogs: true });
});
afterAll(async () => {
  await tg?.dispose();
});

describe("Telegram: the delivery trail across a database blip", () => {
  it("keeps the record that the reply was delivered when its first write fails once (README: every attempt and outcome is in EventLog)", async () => {
    // The next write of a delivery.succeeded fact fails once, as a database that is briefly unreachable.
    tg.host.databaseOutage({ queries: 1, matching: "delivery.succeeded" });
    expect((await sayOnTelegram(tg.webhookUrl, tg.secretToken, "-100556", "record me")).status).toBe(200);
    const runId = await waitFor(() => tg.runner.contexts.find((c) => c.input.text === "record me")?.run_id);
    await tg.host.waitForRun(runId);
    await waitFor(() => tg.fake.callsTo(/\/sendMessage$/).some((c) => String(c.body.chat_id) === "-100556" && c.reply?.status === undefined), 10_000, "the reply sent");
    // Written when tried again. endLostRun relies on this very record (runsStore.deliveredReply) to decide whether to send a failure notice.
    await waitFor(async () => (await tg.trail(runId)).some((r) => r.type === "delivery.succeeded"), 10_000, "the delivery.succeeded record");
    expect((await tg.trail(runId)).filter((r) => r.type === "delivery.succeeded")).toHaveLength(1);
  });
});

describe("Telegram: a reply whose bot cannot be loaded for a few seconds", () => {
  it("still reaches the chat once the database answers again (a blip of a few seconds drops no completed answer), the failure logged once", async () => {
    const chat = "-100557";
    const sent = () => tg.fake.callsTo(/\/sendMessage$/).filter((c) => String(c.body.chat_id) === chat).map((c) => c.body.text);
    expect((await sayOnTelegram(tg.webhookUrl, tg.secretToken, chat, "sleep 1500")).status).toBe(200);
    expect((await sayOnTelegram(tg.webhookUrl, tg.secretToken, chat, "queued behind")).status).toBe(200);
    // The database fails the next four reads of the bot's row (the queued run's reply, as it starts): a blip of a few seconds.
    tg.host.databaseOutage({ queries: 4, matching: 'from \\"bot\\"' });
    const runId = await waitFor(() => tg.runner.contexts.find((c) => c.input.text === "queued behind")?.run_id, 15_000, "the queued run");
    expect((await tg.host.waitForRun(runId)).status).toBe("completed");
    await waitFor(() => sent().length === 2, 15_000, "the queued run's reply");
    expect(sent()).toEqual(["echo: sleep 1500", "echo: queued behind"]);
    // The bot's row was asked for again, backing off, until the database answered.
    const connect = (await tg.trail(runId)).filter((r) => r.operation === "connect").map((r) => [r.attempt, r.code, r.will_retry]);
    expect(connect).toEqual([1, 2, 3, 4].map((n) => [n, "bot_not_loaded", true]));
    // The trail is the conversation's EventLog, which its runners read (event.page): the failure is told, not the
    // statement that failed, naming the bot table's columns (the Host API's own host faults keep that for the log).
    const errors = (await tg.trail(runId)).filter((r) => r.operation === "connect").map((r) => String(r.error));
    expect(errors.join("\n")).not.toMatch(/select|credentials_json|query/i);
    expect(errors[0]).toMatch(/could not be read/);
    // The log has the cause once, and the recovery, not a line per attempt: an outage of minutes would be hundreds.
    await expect.poll(() => tg.host.logs()).toContain(`bot ${tg.botId}: read for a reply again (3 more failures since the last line)`);
    const failures = tg.host.logs().split("\n").filter((l) => l.startsWith(`bot ${tg.botId}: not read for a reply`));
    expect(failures).toEqual([expect.stringMatching(/: not read for a reply: .*database unavailable \(outage drill\)/)]);
  }, 40_000);
});

describe("Telegram: an answer's file whose lookup the database fails", () => {
  it("records the file as unavailable, telling the failure, not the database's own words (its runners read the trail; the cause goes to the log)", async () => {
    const chat = "-100558";
    tg.host.databaseOutage({ queries: 1, matching: 'from \\"artifact\\"' });
    expect((await sayOnTelegram(tg.webhookUrl, tg.secretToken, chat, "show art_looked_up_in_vain")).status).toBe(200);
    const runId = await waitFor(() => tg.runner.contexts.find((c) => c.input.text === "show art_looked_up_in_vain")?.run_id, 15_000, "the run");
    expect((await tg.host.waitForRun(runId)).status).toBe("completed");
    const failed = await waitFor(async () => (await tg.trail(runId)).find((r) => r.type === "delivery.failed" && r.operation === "send_file"), 15_000, "the file's delivery.failed");
    expect(failed.code).toBe("artifact_unavailable");
    expect(failed.error).toMatch(/could not be looked up/);
    expect(failed.error).not.toMatch(/outage drill|select|query/i);
    // The text still went.
    await waitFor(() => tg.fake.callsTo(/\/sendMessage$/).some((c) => String(c.body.chat_id) === chat), 10_000, "the text");
  }, 40_000);
});
