import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { addTelegramBot, type FakeReply, type PlatformCall, sayOnTelegram, startFakePlatform, waitFor } from "../support/fake-platform";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * A chat reply fed from the run's ledger as read back from the database (its final write applied but answered late,
 * as for a reply resumed by a new instance: markDropped) must not show the message past RUN_MAX_MESSAGES, which failed
 * the run and was never applied: the live reply never shows it, nor does its transcript hold it.
 */
const BOT_TOKEN = "123456:OVERCAP-telegram-bot-token-abcdefgh";
const SECRET_TOKEN = "tg-secret-token-overcap-0123456789";
const OVER_CAP = "probe-over-cap-message-marker";

let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
let webhookUrl: string;
let nextId = 100;

function api(call: PlatformCall): FakeReply {
  if (call.path.endsWith("/sendMessage")) return { json: { ok: true, result: { message_id: ++nextId, chat: { id: Number(call.body.chat_id) }, text: call.body.text } } };
  return { json: { ok: true, result: { message_id: ++nextId } } };
}

beforeAll(async () => {
  fake = await startFakePlatform(api);
  runner = await startAdHocRunner({
    name: "over-cap-replay",
    async onRun({ body }, res) {
      // One write: one batch, the run's final one.
      const w = resultWriter(res, body.context.run_id);
      w.send("message.completed", { message: { role: "assistant", content: "first answer" } });
      w.send("message.completed", { message: { role: "assistant", content: "second answer" } });
      w.reply(OVER_CAP);
    },
  });
  host = await startTestHost({ vars: { DB_QUERY_TIMEOUT_MS: "2000", RUN_MAX_MESSAGES: "2" } });
  ({ webhookUrl } = await addTelegramBot(host, { apiBaseUrl: fake.url, botToken: BOT_TOKEN, secretToken: SECRET_TOKEN }, { runner, agentId: "over-cap-replay" }));
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

const sentTo = (chat: string) => fake.callsTo(/\/sendMessage$/).filter((c) => String(c.body.chat_id) === chat).map((c) => c.body.text as string);

describe("a reply replayed from the ledger of a run failed past RUN_MAX_MESSAGES", () => {
  it("shows the messages before the cap, never the one past it", async () => {
    const chat = "-1008803";
    // The final write reaches the database, which applies it after the Worker gave up waiting (DB_QUERY_TIMEOUT_MS).
    host.databaseOutage({ delayMs: 3_000, matching: OVER_CAP });
    expect((await sayOnTelegram(webhookUrl, SECRET_TOKEN, chat, "go")).status).toBe(200);
    await new Promise((r) => setTimeout(r, 1_000));
    // The host's fallback end lands after the late final write: it finds the run ended, and replays its ledger.
    host.databaseOutage({ delayMs: 1_500, matching: "the host failed to record the run" });
    const [run] = await waitFor(async () => {
      const rows = await host.query<{ run_id: string; status: string; error_code: string | null }>("SELECT run_id, status, error_code FROM run WHERE conversation_id = ?", [chat]);
      return rows[0]?.status === "failed" && rows;
    });
    expect(run.error_code).toBe("runner.too_many_messages");
    await waitFor(() => sentTo(chat).includes("second answer"), 15_000, "the answers");
    await new Promise((r) => setTimeout(r, 1_500));
    const sent = sentTo(chat);
    expect(sent.slice(0, 2)).toEqual(["first answer", "second answer"]);
    expect(sent.filter((t) => t.includes(OVER_CAP))).toEqual([]);
  }, 40_000);
});
