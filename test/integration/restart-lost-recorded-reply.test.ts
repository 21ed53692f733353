import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LocalHost } from "../../local/host";
import { startHostOn, waitForRunOn } from "../support/host";
import { deferred } from "../support/host-api";
import { ANSWER_FILE, sayOnTelegram, startFakePlatform, telegramBotApi, waitFor } from "../support/fake-platform";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { keepTelegramBot, useDataDir } from "../support/restart-host";

/**
 * A chat run that recorded its answer (message.completed) whose send was still waiting out a rate limit when the host
 * restarted: the run ends host.session_lost. README "How it runs": "a chat reply still on its way (a rate limit being
 * waited out) is sent by the next instance from the run's ledger, unless the delivery trail shows the platform already
 * took part of it"; "Delivery": a completed assistant message is sent as a reply (a run that fails after its message
 * sends no notice). README "Artifacts": files announced after the run's last message are sent after the text "also when
 * the run is ... lost with its instance". The chat must get the same thing whether the host restarted once (the run is
 * ended as lost) or again while that reply was pending (PendingReplies.recover replays the ledger).
 */
const botToken = "123456:TEST-telegram-bot-token-lostreply";
const secretToken = "tg-secret-token-lostreply-0123";
const dataDir = useDataDir("agent-host-lost-reply-");
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
const never = deferred();
const started: string[] = [];
/** Chats whose next sendMessages are refused with a 429 asking to wait these many seconds, one each. */
const throttles = new Map<string, number[]>();
const NOTICE = "Sorry, I could not answer this time.";

const start = () => startHostOn(dataDir.path, { RUN_WATCHDOG_INTERVAL_MS: "1000" });

beforeAll(async () => {
  fake = await startFakePlatform(telegramBotApi(botToken, new Map(), throttles));
  runner = await startAdHocRunner({
    name: "lostreply",
    async onRun({ body }, res) {
      const ctx = body.context;
      const text = String(ctx.input.text);
      started.push(text);
      const w = resultWriter(res, ctx.run_id);
      if (text.startsWith("answer")) {
        w.send("message.completed", { message: { role: "assistant", content: `recorded: ${text}` } });
        return never.promise;
      }
      if (text.startsWith("dropped")) {
        // Strict payload with an unknown key: dropped (runner.result_dropped), never shown; the valid one after it is the answer.
        w.send("message.completed", { message: { role: "assistant", content: `DROPPED: ${text}` }, message_id: "m1" });
        w.send("message.completed", { message: { role: "assistant", content: `recorded: ${text}` } });
        return never.promise;
      }
      if (text.startsWith("file")) {
        w.send("message.completed", { message: { role: "assistant", content: `recorded: ${text}` } });
        w.send("artifact.created", { artifact_type: "file", name: "report.bin", mime_type: "application/octet-stream", content_base64: ANSWER_FILE.toString("base64") });
        return never.promise;
      }
      if (text.startsWith("draft")) {
        w.send("message.delta", { chunk: { role: "assistant", content: `partial ${text}` } });
        return never.promise;
      }
      w.reply(`done: ${text}`);
    },
  });
  ({ webhookPath } = await keepTelegramBot(start, { apiBaseUrl: fake.url, botToken, secretToken }, { runner, agentId: "lostreply" }));
});
afterAll(async () => {
  never.resolve();
  await runner?.close();
  await fake?.close();
});

let webhookPath = "";
const say = (host: LocalHost, chat: string, text: string) => sayOnTelegram(`${host.url}${webhookPath}`, secretToken, chat, text);
const callsIn = (chat: string, method: RegExp) => fake.calls.filter((c) => method.test(c.path) && String(c.body?.chat_id ?? /name="chat_id"\r\n\r\n([^\r]*)/.exec(c.raw)?.[1]) === chat);
const sentTo = (chat: string) => callsIn(chat, /sendMessage$/).filter((c) => c.reply?.status === undefined).map((c) => c.body.text as string);
const runOf = async (host: LocalHost, text: string) =>
  waitFor(async () => (await host.query<{ run_id: string | null }>("SELECT run_id FROM event_log WHERE source = 'telegram' AND input_summary LIKE ?", [`%${text}%`]))[0]?.run_id ?? undefined, 10_000, `run of ${text}`);
const throttled = (chat: string) => callsIn(chat, /sendMessage$/).filter((c) => c.reply?.status === 429).length;
/**
 * The host has taken in `n` refusals of the run's sends: their delivery.failed records are written, so the posting mark
 * each refusal takes back is too (the output gate holds that write until the mark's removal is durable). A restart
 * before that would find a send on the wire, which is not posted again.
 */
const refusalsRecorded = (host: LocalHost, runId: string, n: number) =>
  waitFor(async () => (await host.query("SELECT 1 FROM event_log WHERE run_id = ? AND event_type = 'delivery.failed'", [runId])).length >= n || undefined, 10_000, `${n} refusals recorded`);
/** Replies reach a chat in the order their runs ended: once a later run's answer is there, every earlier reply has settled. */
async function barrier(host: LocalHost, chat: string) {
  expect((await say(host, chat, "marker")).status).toBe(200);
  await waitFor(() => sentTo(chat).includes("done: marker"), 20_000, "the marker's answer");
}

/** A held run whose first send (its recorded answer, or its draft) is refused with a long 429, then the host restarts. */
async function loseWhileThrottled(host: LocalHost, chat: string, text: string, waits = [30]): Promise<{ host: LocalHost; runId: string }> {
  throttles.set(chat, waits);
  expect((await say(host, chat, text)).status).toBe(200);
  await waitFor(() => started.includes(text), 10_000, "the held run");
  const runId = await runOf(host, text);
  await waitFor(() => throttled(chat) === 1, 10_000, "the first send, refused");
  await refusalsRecorded(host, runId, 1);
  await host.dispose();
  host = await start();
  expect(await waitForRunOn(host, runId, 15_000)).toMatchObject({ status: "failed", error: { code: "host.session_lost" } });
  return { host, runId };
}

describe("a lost chat run whose recorded answer had not reached the chat", () => {
  it("after one restart, the chat gets the recorded answer (from the run's ledger), not a failure notice", async () => {
    let host = await start();
    try {
      ({ host } = await loseWhileThrottled(host, "7101", "answer once"));
      await barrier(host, "7101");
      expect(sentTo("7101")).toEqual(["recorded: answer once", "done: marker"]);
    } finally {
      await host.dispose();
    }
  }, 60_000);

  it("restarted again while that reply waits out a rate limit, the chat gets the same thing", async () => {
    let host = await start();
    try {
      // Its reply after the first restart is refused too, asking to wait 4 s.
      let runId: string;
      ({ host, runId } = await loseWhileThrottled(host, "7102", "answer twice", [30, 4]));
      await waitFor(() => throttled("7102") === 2, 10_000, "the lost run's reply, refused");
      await refusalsRecorded(host, runId, 2);
      await host.dispose();
      host = await start();
      await barrier(host, "7102");
      expect(sentTo("7102")).toEqual(["recorded: answer twice", "done: marker"]);
    } finally {
      await host.dispose();
    }
  }, 60_000);

  it("files announced after the recorded message are sent after it (README: also when the run is lost with its instance)", async () => {
    let host = await start();
    try {
      ({ host } = await loseWhileThrottled(host, "7103", "file please"));
      await barrier(host, "7103");
      expect(sentTo("7103")).toEqual(["recorded: file please", "done: marker"]);
      expect(callsIn("7103", /send(Document|Photo)$/).length).toBe(1);
    } finally {
      await host.dispose();
    }
  }, 60_000);

  it("a draft that never reached the chat still gets the failure notice", async () => {
    let host = await start();
    try {
      ({ host } = await loseWhileThrottled(host, "7104", "draft unseen"));
      await barrier(host, "7104");
      expect(sentTo("7104")).toEqual([NOTICE, "done: marker"]);
    } finally {
      await host.dispose();
    }
  }, 60_000);

  it("a draft that never reached the chat gets the same notice when the host restarts again while it waits", async () => {
    let host = await start();
    try {
      let runId: string;
      ({ host, runId } = await loseWhileThrottled(host, "7106", "draft unseen twice", [30, 4]));
      await waitFor(() => throttled("7106") === 2, 10_000, "the lost run's reply, refused");
      await refusalsRecorded(host, runId, 2);
      await host.dispose();
      host = await start();
      await barrier(host, "7106");
      expect(sentTo("7106")).toEqual([NOTICE, "done: marker"]);
    } finally {
      await host.dispose();
    }
  }, 60_000);

  it("a draft partly shown is left as it is: no notice, no edit", async () => {
    let host = await start();
    try {
      expect((await say(host, "7105", "draft shown")).status).toBe(200);
      const runId = await runOf(host, "draft shown");
      await waitFor(async () => (await host.query("SELECT 1 FROM event_log WHERE run_id = ? AND event_type = 'delivery.succeeded'", [runId])).length > 0, 10_000, "the draft's delivery record");
      await host.dispose();
      host = await start();
      expect(await waitForRunOn(host, runId, 15_000)).toMatchObject({ status: "failed", error: { code: "host.session_lost" } });
      await barrier(host, "7105");
      expect(sentTo("7105")).toEqual(["partial draft shown", "done: marker"]);
      expect(callsIn("7105", /editMessageText$/)).toEqual([]);
    } finally {
      await host.dispose();
    }
  }, 60_000);

  it("a message.completed the host dropped as invalid is not shown by the reply rebuilt from the ledger (PROTOCOL §7)", async () => {
    let host = await start();
    try {
      let runId: string;
      ({ host, runId } = await loseWhileThrottled(host, "7107", "dropped answer"));
      // Live, the dropped message was never sent: the first (refused) send was the valid one.
      expect(callsIn("7107", /sendMessage$/)[0].body.text).toBe("recorded: dropped answer");
      expect((await host.query("SELECT 1 FROM event_log WHERE run_id = ? AND event_type = 'runner.result_dropped'", [runId])).length).toBe(1);
      await barrier(host, "7107");
      expect(sentTo("7107")).toEqual(["recorded: dropped answer", "done: marker"]);
    } finally {
      await host.dispose();
    }
  }, 60_000);
});
