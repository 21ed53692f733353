import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LocalHost } from "../../local/host";
import { startHostOn, waitForRunOn } from "../support/host";
import { deferred } from "../support/host-api";
import { sayOnTelegram, startFakePlatform, waitFor, type PlatformCall } from "../support/fake-platform";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { keepTelegramBot, useDataDir } from "../support/restart-host";

/**
 * README (Delivery): "a send that may have been posted, because no answer came ... [is retried] only on Lark, whose
 * uuid makes a repeat harmless ... elsewhere the final text is not posted again". A host that restarts while its
 * Telegram sendMessage is on the wire (the platform took it; no answer came back) must not post the answer again
 * when the next instance resumes the reply: the chat would show it twice. Two ways the next instance resumes it: a
 * recorded run's pending reply (durable-objects/pending-replies.ts `recover`), and a run whose end was recorded though
 * the instance never heard so, ended as lost with its answer taken from the ledger (src/run/lost-run.ts).
 */
const botToken = "123456:TEST-telegram-bot-token-inflight";
const secretToken = "tg-secret-token-inflight-0123";
const dataDir = useDataDir("agent-host-restart-inflight-");
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let webhookPath: string;
/** Chats whose first sendMessage is posted, its answer held until the test lets it go (the host that asked is gone by then). */
const holding = new Map<string, Promise<void>>();
/** The host a run is on, for the runner that makes its final write go unanswered. */
let current: LocalHost | undefined;
let logs = "";

const start = async () =>
  (current = await startHostOn(dataDir.path, { RUN_WATCHDOG_INTERVAL_MS: "1000", DB_QUERY_TIMEOUT_MS: "2000" }, { onRuntimeOutput: (text) => (logs += text) }));

beforeAll(async () => {
  let nextId = 900;
  fake = await startFakePlatform(async (call: PlatformCall) => {
    const m = /^\/bot([^/]+)\/(.+)$/.exec(call.path);
    if (!m || m[1] !== botToken) return { status: 401, json: { ok: false, error_code: 401, description: "Unauthorized" } };
    const chat = String(call.body?.chat_id);
    const held = holding.get(chat);
    if (m[2] === "sendMessage" && held) {
      holding.delete(chat);
      await held;
    }
    if (m[2] === "sendMessage") return { json: { ok: true, result: { message_id: ++nextId, chat: { id: Number(chat) }, text: call.body.text } } };
    if (m[2] === "editMessageText") return { json: { ok: true, result: { message_id: call.body.message_id, text: call.body.text } } };
    return { status: 404, json: { ok: false, error_code: 404, description: "Not Found" } };
  });
  runner = await startAdHocRunner({
    name: "inflight",
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      if (!ctx.input.text.startsWith("unanswered")) return w.reply(`done: ${ctx.input.text}`);
      // The answer first (its send goes on the wire), then the run's end, whose write is applied but answered too late.
      w.send("message.completed", { message: { role: "assistant", content: `done: ${ctx.input.text}` } });
      await waitFor(() => sendsTo("5572").length > 0, 10_000, "the answer's send");
      current!.databaseOutage({ delayMs: 3_000, matching: "run.completed" });
      w.send("run.completed", { finish_reason: "stop" });
      res.end();
    },
  });
  ({ webhookPath } = await keepTelegramBot(start, { apiBaseUrl: fake.url, botToken, secretToken }, { runner, agentId: "inflight" }));
});
afterAll(async () => {
  await runner?.close();
  await fake?.close();
});

/**
 * Replies reach a chat in the order their runs ended, a reply the next instance resumes first: once a later message's
 * answer is there, whatever the next instance did with the earlier reply is done (rather than waiting a few seconds).
 */
async function barrier(host: LocalHost, chat: string) {
  expect((await sayOnTelegram(`${host.url}${webhookPath}`, secretToken, chat, "marker")).status).toBe(200);
  await waitFor(() => sendsTo(chat).includes("done: marker"), 20_000, "the marker's answer");
}

const sendsTo = (chat: string) => fake.callsTo(/sendMessage$/).filter((c) => String(c.body?.chat_id) === chat).map((c) => c.body.text as string);

describe("a reply whose send is on the wire when the host restarts", () => {
  it("is not posted a second time by the next instance", async () => {
    const release = deferred();
    holding.set("5571", release.promise);
    let host = await start();
    try {
      expect((await sayOnTelegram(`${host.url}${webhookPath}`, secretToken, "5571", "answer me")).status).toBe(200);
      await waitFor(() => sendsTo("5571").length > 0, 10_000, "the send on the wire");
      const [{ run_id: runId }] = await host.query<{ run_id: string }>("SELECT run_id FROM event_log WHERE source = 'telegram' AND input_summary LIKE '%answer me%'");
      expect(await waitForRunOn(host, runId, 10_000)).toMatchObject({ status: "completed" });
      await host.dispose();
      release.resolve();
      host = await start();
      await barrier(host, "5571");
      expect(sendsTo("5571")).toEqual(["done: answer me", "done: marker"]);
    } finally {
      await host.dispose();
    }
  });

  it("is not posted a second time when the run's end was recorded but the instance never heard so (ended as lost)", async () => {
    const release = deferred();
    holding.set("5572", release.promise);
    let host = await start();
    try {
      expect((await sayOnTelegram(`${host.url}${webhookPath}`, secretToken, "5572", "unanswered end")).status).toBe(200);
      await waitFor(() => sendsTo("5572").length > 0, 10_000, "the send on the wire");
      // The final write is delayed past the query timeout (applied, unanswered); from here on the database is away, so
      // the instance can neither record the run's end itself nor end it as lost.
      await new Promise((r) => setTimeout(r, 500));
      host.databaseOutage(true);
      await waitFor(() => logs.includes("lost run not ended yet"), 15_000, "the lost run's end refused");
      // The delayed final write lands meanwhile: the run is completed in the database, and still running for the instance.
      const runId = await waitFor(async () => (await host.query<{ run_id: string; status: string }>("SELECT run_id, status FROM run WHERE conversation_id = '5572' AND status = 'completed'"))[0]?.run_id, 10_000, "the final write applied");
      await host.dispose();
      release.resolve();
      host = await start();
      expect(await waitForRunOn(host, runId, 10_000)).toMatchObject({ status: "completed" });
      await barrier(host, "5572");
      expect(sendsTo("5572")).toEqual(["done: unanswered end", "done: marker"]);
    } finally {
      await host.dispose();
    }
  });
});
