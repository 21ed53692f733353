import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT } from "../../local/build";
import { startHost, type LocalHost } from "../../local/host";
import { adminCall, bindRunner } from "../../local/setup";
import { ADMIN_TOKEN, waitForRunOn } from "../support/host";
import { deferred } from "../support/host-api";
import { sayOnTelegram, startFakePlatform, telegramBotApi, waitFor } from "../support/fake-platform";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * PROTOCOL §7: a strict payload that fails validation is dropped (README: "recorded, never shown"). A chat reply the
 * next instance rebuilds from the run's ledger (README "How it runs": a reply still on its way when the instance died
 * is sent by the next instance from the run's ledger) must show what the live reply would: not the results the host
 * dropped. Here the runner's first message.completed carries a key the strict schema refuses (dropped and audited);
 * its second is valid. Live, the chat is sent only the second; after a restart, the same.
 */
const botToken = "123456:TEST-telegram-bot-token-droppedreplay";
const secretToken = "tg-secret-token-droppedreplay-0123";
let dataDir: string;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
const never = deferred();
const started: string[] = [];
const throttles = new Map<string, number[]>();
let webhookPath = "";

const start = () => startHost({ adminToken: ADMIN_TOKEN, dataDir, scriptPath: join(ROOT, "dist/test/worker.js"), vars: { RUN_WATCHDOG_INTERVAL_MS: "1000" } });

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "agent-host-dropped-replay-"));
  fake = await startFakePlatform(telegramBotApi(botToken, new Map(), throttles));
  runner = await startAdHocRunner({
    name: "droppedreplay",
    async onRun({ body }, res) {
      const ctx = body.context;
      const text = String(ctx.input.text);
      started.push(text);
      const w = resultWriter(res, ctx.run_id);
      if (text.startsWith("held")) {
        // Strict payload with an unknown key: dropped (runner.result_dropped), never shown.
        w.send("message.completed", { message: { role: "assistant", content: `DROPPED: ${text}` }, message_id: "m1" });
        w.send("message.completed", { message: { role: "assistant", content: `recorded: ${text}` } });
        return never.promise;
      }
      w.reply(`done: ${text}`);
    },
  });
  const host = await start();
  try {
    const created = await adminCall<{ bot_id: string; webhook_url: string }>(host, "POST", "/v1/admin/bots", { platform: "telegram", name: "tg", api_base_url: fake.url, credentials: { bot_token: botToken, secret_token: secretToken } });
    expect(created.status).toBe(201);
    webhookPath = new URL(created.body.webhook_url).pathname;
    await bindRunner(host, { baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "droppedreplay", scope: { type: "bot", id: created.body.bot_id } });
  } finally {
    await host.dispose();
  }
});
afterAll(async () => {
  never.resolve();
  await runner?.close();
  await fake?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

const say = (host: LocalHost, chat: string, text: string) => sayOnTelegram(`${host.url}${webhookPath}`, secretToken, chat, text);
const callsIn = (chat: string, method: RegExp) => fake.calls.filter((c) => method.test(c.path) && String(c.body?.chat_id) === chat);
const sentTo = (chat: string) => callsIn(chat, /sendMessage$/).filter((c) => c.reply?.status === undefined).map((c) => c.body.text as string);
const throttled = (chat: string) => callsIn(chat, /sendMessage$/).filter((c) => c.reply?.status === 429).length;
const runOf = (host: LocalHost, text: string) =>
  waitFor(async () => (await host.query<{ run_id: string | null }>("SELECT run_id FROM event_log WHERE source = 'telegram' AND input_summary LIKE ?", [`%${text}%`]))[0]?.run_id ?? undefined, 10_000, `run of ${text}`);

describe("a chat reply rebuilt from the run's ledger after a restart", () => {
  it("does not show a message.completed the host dropped as invalid", async () => {
    let host = await start();
    try {
      throttles.set("7201", [30]);
      expect((await say(host, "7201", "held answer")).status).toBe(200);
      await waitFor(() => started.includes("held answer"), 10_000, "the held run");
      const runId = await runOf(host, "held answer");
      // Live, the dropped message is not sent: the first send is the valid one (refused with a long 429).
      await waitFor(() => throttled("7201") === 1, 10_000, "the first send, refused");
      expect(callsIn("7201", /sendMessage$/).map((c) => c.body.text)).toEqual(["recorded: held answer"]);
      await waitFor(async () => (await host.query("SELECT 1 FROM event_log WHERE run_id = ? AND event_type = 'delivery.failed'", [runId])).length > 0 || undefined, 10_000, "refusal recorded");
      expect((await host.query("SELECT 1 FROM event_log WHERE run_id = ? AND event_type = 'runner.result_dropped'", [runId])).length).toBe(1);
      await host.dispose();
      host = await start();
      expect(await waitForRunOn(host, runId, 15_000)).toMatchObject({ status: "failed", error: { code: "host.session_lost" } });
      expect((await say(host, "7201", "marker")).status).toBe(200);
      await waitFor(() => sentTo("7201").includes("done: marker"), 20_000, "the marker's answer");
      expect(sentTo("7201")).toEqual(["recorded: held answer", "done: marker"]);
    } finally {
      await host.dispose();
    }
  }, 60_000);
});
