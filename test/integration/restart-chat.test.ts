import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type HostOptions, type LocalHost } from "../../local/host";
import { startHostOn, waitForRunOn } from "../support/host";
import { deferred } from "../support/host-api";
import { sayOnTelegram, startFakePlatform, telegramBotApi, waitFor } from "../support/fake-platform";
import { keepTelegramBot, startHoldingRunner, useDataDir } from "../support/restart-host";

/**
 * A Telegram chat whose host restarts mid-work (same data folder). A run lost with the instance tells the chat it
 * failed, and the message queued behind it is answered after that notice. A run that completed, whose answer was
 * still being delivered (waiting out the platform's rate limit) when the instance died, is not lost silently: the
 * answer reaches the chat after the restart; so does a lost run's failure notice when the host restarts again while
 * that notice waits out a rate limit.
 */
const botToken = "123456:TEST-telegram-bot-token-restart";
const secretToken = "tg-secret-token-restart-0123";
const dataDir = useDataDir("agent-host-restart-chat-");
let runner: Awaited<ReturnType<typeof startHoldingRunner>>;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
const never = deferred();
const started: string[] = [];
/** Chats whose next sendMessages are refused with a 429 asking to wait these many seconds, one each. */
const throttleOnce = new Map<string, number[]>();

const start = (more: Partial<HostOptions> = {}) => startHostOn(dataDir.path, { RUN_WATCHDOG_INTERVAL_MS: "1000" }, more);

beforeAll(async () => {
  fake = await startFakePlatform(telegramBotApi(botToken, new Map(), throttleOnce));
  runner = await startHoldingRunner("restartchat", never.promise, started);
  // The bot and its binding, kept in the data folder for every test's host.
  ({ webhookPath, botId } = await keepTelegramBot(start, { apiBaseUrl: fake.url, botToken, secretToken }, { runner, agentId: "restartchat" }));
});
afterAll(async () => {
  never.resolve();
  await runner?.close();
  await fake?.close();
});


const sentTo = (chat: string) => fake.callsTo(/sendMessage$/).filter((c) => String(c.body?.chat_id) === chat && c.reply?.status === undefined).map((c) => c.body.text as string);
/** The host has taken in the run's refused send (its delivery.failed record is written, so the posting mark it took back is too): a restart before that finds a send on the wire, not posted again. */
const refusalRecorded = (host: LocalHost, runId: string) =>
  waitFor(async () => (await host.query("SELECT 1 FROM event_log WHERE run_id = ? AND event_type = 'delivery.failed'", [runId])).length > 0 || undefined, 10_000, "the refusal recorded");
const runOf = async (host: LocalHost, text: string) =>
  waitFor(async () => (await host.query<{ run_id: string | null }>("SELECT run_id FROM event_log WHERE source = 'telegram' AND input_summary LIKE ?", [`%${text}%`]))[0]?.run_id ?? undefined, 10_000, `run of ${text}`);

let webhookPath = "";
let botId = "";
const say = (host: LocalHost, chat: string, text: string) => sayOnTelegram(`${host.url}${webhookPath}`, secretToken, chat, text);

describe("a Telegram chat across a host restart", () => {
  it("a run lost with the instance tells the chat it failed, then the message queued behind it is answered", async () => {
    let host = await start();
    try {
      expect((await say(host, "5551", "hold on")).status).toBe(200);
      await waitFor(() => started.includes("hold on"), 10_000, "the held run");
      expect((await say(host, "5551", "next one")).status).toBe(200);
      const lostRun = await runOf(host, "hold on");
      const nextRun = await runOf(host, "next one");
      await host.dispose();
      host = await start();
      expect(await waitForRunOn(host, lostRun, 15_000)).toMatchObject({ status: "failed", error: { code: "host.session_lost" } });
      expect(await waitForRunOn(host, nextRun, 15_000)).toMatchObject({ status: "completed" });
      await waitFor(() => sentTo("5551").length >= 2, 10_000, "two replies");
      expect(sentTo("5551")).toEqual(["Sorry, I could not answer this time.", "done: next one"]);
    } finally {
      await host.dispose();
    }
  });

  it("a completed run's answer still waiting out a rate limit when the instance died reaches the chat after the restart", async () => {
    let host = await start();
    try {
      throttleOnce.set("5552", [4]);
      expect((await say(host, "5552", "answer me")).status).toBe(200);
      const runId = await runOf(host, "answer me");
      expect(await waitForRunOn(host, runId, 10_000)).toMatchObject({ status: "completed" });
      // The first send was refused with a 429; the reply waits 4 s before the next attempt.
      await waitFor(() => fake.callsTo(/sendMessage$/).some((c) => String(c.body?.chat_id) === "5552"), 10_000, "the first attempt");
      await refusalRecorded(host, runId);
      await host.dispose();
      host = await start();
      await waitFor(() => sentTo("5552").length > 0, 15_000, "the answer after the restart").catch(() => undefined);
      expect(sentTo("5552")).toEqual(["done: answer me"]);
    } finally {
      await host.dispose();
    }
  });

  it("a reply left by the instance that died, whose first look the database fails, is logged naming its conversation, and still reaches the chat", async () => {
    let host = await start();
    try {
      throttleOnce.set("5553", [4]);
      expect((await say(host, "5553", "answer me later")).status).toBe(200);
      const runId = await runOf(host, "answer me later");
      expect(await waitForRunOn(host, runId, 10_000)).toMatchObject({ status: "completed" });
      await refusalRecorded(host, runId);
      await host.dispose();
      // Whether the reply was delivered meanwhile (its delivery trail) is the new instance's first question: refused once.
      let logs = "";
      host = await start({ outage: { queries: 1, matching: "delivery.succeeded" }, onRuntimeOutput: (text) => (logs += text) });
      await waitFor(() => sentTo("5553").length > 0, 15_000, "the answer after the restart").catch(() => undefined);
      expect(sentTo("5553")).toEqual(["done: answer me later"]);
      expect(logs).toMatch(new RegExp(`^pending replies not resumed yet; conversation 5553, bot ${botId}, run ${runId}: .*database unavailable \\(outage drill\\)$`, "m"));
    } finally {
      await host.dispose();
    }
  }, 40_000);

  it("a lost run's failure notice still waiting out a rate limit when the instance died again reaches the chat", async () => {
    let host = await start();
    try {
      expect((await say(host, "5561", "hold again")).status).toBe(200);
      await waitFor(() => started.includes("hold again"), 10_000, "the held run");
      const runId = await runOf(host, "hold again");
      // First restart: the run is lost; its notice's first send is refused with a 429 asking to wait 4 s.
      throttleOnce.set("5561", [4]);
      await host.dispose();
      host = await start();
      expect(await waitForRunOn(host, runId, 15_000)).toMatchObject({ status: "failed", error: { code: "host.session_lost" } });
      await waitFor(() => fake.callsTo(/sendMessage$/).some((c) => String(c.body?.chat_id) === "5561" && c.reply?.status === 429), 10_000, "the notice's first attempt");
      await refusalRecorded(host, runId);
      // Second restart while the notice waits.
      await host.dispose();
      host = await start();
      await waitFor(() => sentTo("5561").length > 0, 15_000, "the notice after the second restart").catch(() => undefined);
      expect(sentTo("5561")).toEqual(["Sorry, I could not answer this time."]);
    } finally {
      await host.dispose();
    }
  }, 60_000);
});
