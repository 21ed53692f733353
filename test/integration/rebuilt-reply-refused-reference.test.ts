import { describe, expect, it } from "vitest";
import { sayOnTelegram, telegramBotApi, waitFor } from "../support/fake-platform";
import { startAdHocRunner } from "../support/runner";
import { useTelegramBotHost } from "../support/telegram-bot-host";

/**
 * A chat run's final write (one batch: an artifact reference the host refuses, a long burst of telemetry, the answer,
 * run.completed) is applied but answered late, so its reply is rebuilt from the ledger (`endRecordedMeanwhile`). The
 * reference's warning comes after the whole batch, here more than two ledger pages (1,000 rows each) after the
 * reference: the rebuilt reply must still leave it out, as the live reply would, and not try to send a file the run
 * may not show (a `delivery.failed` the live reply never had).
 */
const BOT_TOKEN = "123456:TEST-telegram-rebuilt-refused";
const SECRET_TOKEN = "tg-secret-token-rebuilt-refused";
const CHAT = "-1008810";
const REPLY = "probe-rebuilt-reply-refused-reference";
const TELEMETRY = 2_500;
const bot = useTelegramBotHost({
  agentId: "rebuilt-refused",
  botToken: BOT_TOKEN,
  secretToken: SECRET_TOKEN,
  api: telegramBotApi(BOT_TOKEN),
  vars: { DB_QUERY_TIMEOUT_MS: "1000" },
  startRunner: () => startAdHocRunner({
    name: "rebuilt-refused",
    async onRun({ body }, res) {
      const runId = body.context.run_id;
      const line = (type: string, data: unknown) => JSON.stringify({ run_id: runId, type, data }) + "\n";
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      if (body.context.input.text !== "go") return void res.end(line("message.completed", { message: { role: "assistant", content: "after" } }) + line("run.completed", { finish_reason: "stop" }));
      // One write, so one batch: the reference first, its warning after everything else of the batch.
      const telemetry = Array.from({ length: TELEMETRY }, (_, i) => line("tool.call.started", { tool_call_id: `c${i}`, tool_name: "t", parameters: {} })).join("");
      res.end(line("artifact.created", { artifact_type: "file", artifact_id: "art_never_this_runs" }) + telemetry + line("message.completed", { message: { role: "assistant", content: REPLY } }) + line("run.completed", { finish_reason: "stop" }));
    },
  }),
});

describe("a reply rebuilt from a ledger whose refused reference is warned of pages later", () => {
  it("leaves the reference out, as the live reply would", async () => {
    // The final write is applied; its answer comes after the Worker gave up on it.
    bot.host.databaseOutage({ answerDelayMs: 2_000, matching: REPLY, queries: 1 });
    expect((await sayOnTelegram(bot.webhookUrl, SECRET_TOKEN, CHAT, "go")).status).toBe(200);
    await waitFor(() => bot.fake.callsTo(/\/sendMessage$/).some((c) => c.body.text === REPLY), 20_000, "the rebuilt reply");
    const [run] = await bot.host.query<{ run_id: string; status: string }>("SELECT run_id, status FROM run WHERE conversation_id = ?", [CHAT]);
    expect(run.status).toBe("completed");
    const warned = await bot.host.query<{ seq: number }>("SELECT seq FROM run_event WHERE run_id = ? AND type = 'host.warning'", [run.run_id]);
    expect(warned.map((w) => w.seq)).toEqual([TELEMETRY + 4]);
    // The next message's reply comes once this one has settled, its records written.
    expect((await sayOnTelegram(bot.webhookUrl, SECRET_TOKEN, CHAT, "next")).status).toBe(200);
    await waitFor(() => bot.fake.callsTo(/\/sendMessage$/).some((c) => c.body.text === "after"), 20_000, "the next reply");
    const failed = await bot.host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE run_id = ? AND event_type = 'delivery.failed'", [run.run_id]);
    expect(failed.map((f) => JSON.parse(f.data_json))).toEqual([]);
    expect(bot.fake.callsTo(/\/send(Document|Photo)$/)).toEqual([]);
  }, 40_000);
});
