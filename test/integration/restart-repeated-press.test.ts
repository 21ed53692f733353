import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PRESS_REPEAT_WINDOW_MS } from "../../durable-objects/repeated-presses";
import type { LocalHost } from "../../local/host";
import { storedKeysByObject } from "../support/do-storage";
import { startHostOn, waitForRunOn } from "../support/host";
import { deferred } from "../support/host-api";
import { sayOnTelegram, startFakePlatform, telegramBotApi, waitFor } from "../support/fake-platform";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { keepTelegramBot, useDataDir } from "../support/restart-host";

/**
 * README (Chat platforms): a button pressed again moments after a press whose answer is still waiting or running is
 * not answered twice. A restart of the host between the two presses (a deploy, an evicted object) does not change
 * that: the first press's run still waits, and the repeat is refused as it would have been.
 */
const botToken = "123456:TEST-telegram-bot-token-press-restart";
const secretToken = "tg-secret-token-press-restart-01";
const dataDir = useDataDir("agent-host-press-restart-");
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
const never = deferred();
/** Lets the runs of presses whose data starts with "slow" answer ("quick": they answer at once). */
const slow = deferred();
const started: string[] = [];
let webhookUrl = "";
let updateId = 900_000;

// The watchdog soon: the run lost with the first instance ends, and the first press's run starts, as soon as it may.
const start = () => startHostOn(dataDir.path, { RUN_WATCHDOG_INTERVAL_MS: "1000" });

beforeAll(async () => {
  fake = await startFakePlatform(telegramBotApi(botToken));
  runner = await startAdHocRunner({
    name: "pressrestart",
    async onRun({ body }, res) {
      const ctx = body.context;
      started.push(ctx.input.text);
      const w = resultWriter(res, ctx.run_id);
      if (ctx.input.text.startsWith("quick")) return w.reply(`done: ${ctx.input.text}`);
      if (ctx.input.text.startsWith("slow")) {
        await slow.promise;
        return w.reply(`done: ${ctx.input.text}`);
      }
      // Any other answer takes long: the first press's is still under way when the button is pressed again.
      await never.promise;
    },
  });
  ({ webhookPath: webhookUrl } = await keepTelegramBot(start, { apiBaseUrl: fake.url, botToken, secretToken }, { runner, agentId: "pressrestart" }));
});
afterAll(async () => {
  never.resolve();
  slow.resolve();
  await runner?.close();
  await fake?.close();
});

/** Ada's press of the one button on the bot's message in `chat`, its callback data `data`; the webhook's answer. */
async function press(host: LocalHost, id: string, chat: number, data: string): Promise<{ text?: string }> {
  const keyboard = { inline_keyboard: [[{ text: "Approve", callback_data: data }]] };
  const message = { message_id: 77, date: Math.floor(Date.now() / 1000), chat: { id: chat, type: "private" }, from: { id: 123456, is_bot: true, first_name: "Test" }, text: "Approve?", reply_markup: keyboard };
  const update = { update_id: ++updateId, callback_query: { id, from: { id: 42, is_bot: false, first_name: "Ada" }, message, chat_instance: "-9", data } };
  const res = await fetch(`${host.url}${webhookUrl}`, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": secretToken }, body: JSON.stringify(update) });
  expect(res.status).toBe(200);
  return (await res.json()) as { text?: string };
}
/**
 * The `press:` keys of each conversation's object stored since this call: the test's own (other tests' objects keep
 * presses, or forget them, meanwhile, as their runs go on or end).
 */
function pressKeysOfNewObjects(): () => number[] {
  const earlier = new Set(storedKeysByObject(join(dataDir.path, "do")).keys());
  return () => [...storedKeysByObject(join(dataDir.path, "do"))].filter(([file]) => !earlier.has(file)).map(([, keys]) => keys["press:"] ?? 0);
}
const rowsOf = (host: LocalHost, chat: number) =>
  host.query<{ event_id: string; run_id: string | null; disposition: string; metadata_json: string }>("SELECT event_id, run_id, disposition, metadata_json FROM event_log WHERE source = 'telegram' AND source_event_type = 'callback_query' AND conversation_id = ? ORDER BY seq", [String(chat)]);

describe("a repeated press across a host restart", () => {
  it("is refused when the first press's run still waits after the restart, naming it", async () => {
    let host = await start();
    try {
      // A run holds the chat: the first press waits its turn behind it.
      const chat = 5561;
      expect((await sayOnTelegram(`${host.url}${webhookUrl}`, secretToken, String(chat), "hold on")).status).toBe(200);
      await waitFor(() => started.includes("hold on"), 10_000, "the held run");
      const pressedAt = Date.now();
      expect((await press(host, "cb-restart-1", chat, "approve")).text).toBeUndefined();
      await host.dispose();
      host = await start();
      expect(await press(host, "cb-restart-2", chat, "approve")).toMatchObject({ text: "Already answering your earlier press of this button." });
      expect(Date.now() - pressedAt).toBeLessThan(PRESS_REPEAT_WINDOW_MS);
      const [first, repeat] = await rowsOf(host, chat);
      expect(first.run_id).not.toBeNull();
      expect(repeat).toMatchObject({ disposition: "rejected", run_id: null });
      expect(JSON.parse(repeat.metadata_json).rejection).toEqual({ reason: "repeated_press", first_event_id: first.event_id, first_run_id: first.run_id });
      // The first press is answered still (the run lost with the first instance ended), once.
      await waitFor(() => started.includes("approve"), 15_000, "the first press's run");
      await new Promise((r) => setTimeout(r, 300));
      expect(started.filter((t) => t === "approve")).toHaveLength(1);
    } finally {
      await host.dispose();
    }
  }, 60_000);

  it("is answered when the first press's run was lost with the instance that ran it: that run answers nothing", async () => {
    let host = await start();
    try {
      const chat = 5562;
      const pressedAt = Date.now();
      expect((await press(host, "cb-lost-1", chat, "approve lost")).text).toBeUndefined();
      await waitFor(() => started.includes("approve lost"), 10_000, "the first press's run");
      await host.dispose();
      host = await start();
      expect((await press(host, "cb-lost-2", chat, "approve lost")).text).toBeUndefined();
      expect(Date.now() - pressedAt).toBeLessThan(PRESS_REPEAT_WINDOW_MS);
      const [first, again] = await rowsOf(host, chat);
      expect(again.run_id).not.toBeNull();
      expect(again.run_id).not.toBe(first.run_id);
      await waitFor(() => started.filter((t) => t === "approve lost").length === 2, 15_000, "the second press's run");
    } finally {
      await host.dispose();
    }
  }, 60_000);

  it("keeps a press in the object's storage while its run is under way, and nothing of it once that run has ended", async () => {
    const host = await start();
    try {
      const chat = 5563;
      const pressKeys = pressKeysOfNewObjects();
      expect((await press(host, "cb-slow-1", chat, "slow approve")).text).toBeUndefined();
      await waitFor(() => started.includes("slow approve"), 10_000, "the press's run");
      expect(pressKeys()).toEqual([1]);
      slow.resolve();
      const [first] = await rowsOf(host, chat);
      expect(await waitForRunOn(host, first.run_id!, 15_000)).toMatchObject({ status: "completed" });
      await waitFor(() => pressKeys()[0] === 0 || undefined, 5_000, "the press gone from storage").catch(() => undefined);
      expect(pressKeys()).toEqual([0]);
    } finally {
      await host.dispose();
    }
  }, 60_000);

  it("keeps nothing of a press whose run ended only after a restart, though no press came since", async () => {
    let host = await start();
    try {
      const chat = 5564;
      const pressKeys = pressKeysOfNewObjects();
      expect((await sayOnTelegram(`${host.url}${webhookUrl}`, secretToken, String(chat), "hold for the press")).status).toBe(200);
      await waitFor(() => started.includes("hold for the press"), 10_000, "the held run");
      expect((await press(host, "cb-ended-1", chat, "quick approve")).text).toBeUndefined();
      expect(pressKeys()).toEqual([1]);
      await host.dispose();
      // The held run was lost with that instance; the press's run, waiting behind it, starts in the next and answers.
      host = await start();
      const [first] = await rowsOf(host, chat);
      expect(await waitForRunOn(host, first.run_id!, 15_000)).toMatchObject({ status: "completed" });
      await waitFor(() => pressKeys()[0] === 0 || undefined, 5_000, "the press gone from storage").catch(() => undefined);
      expect(pressKeys()).toEqual([0]);
    } finally {
      await host.dispose();
    }
  }, 60_000);
});
