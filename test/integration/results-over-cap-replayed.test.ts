import { describe, expect, it } from "vitest";
import { waitFor } from "../support/fake-platform";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { telegramCallsAnsweredAsSent, useTelegramBotHost } from "../support/telegram-bot-host";
import { holdFinalWriteThenHostFailureEnd } from "../support/unanswered-final-write";

/**
 * A chat reply fed from the run's ledger as read back from the database (its final write applied but answered late,
 * as for a reply resumed by a new instance: markDropped) must not show the message past RUN_MAX_MESSAGES, which failed
 * the run and was never applied: the live reply never shows it, nor does its transcript hold it.
 */
const OVER_CAP = "probe-over-cap-message-marker";

const bot = useTelegramBotHost({
  agentId: "over-cap-replay",
  api: telegramCallsAnsweredAsSent(),
  vars: { DB_QUERY_TIMEOUT_MS: "2000", RUN_MAX_MESSAGES: "2" },
  startRunner: () => startAdHocRunner({
    name: "over-cap-replay",
    async onRun({ body }, res) {
      // One write: one batch, the run's final one.
      const w = resultWriter(res, body.context.run_id);
      w.send("message.completed", { message: { role: "assistant", content: "first answer" } });
      w.send("message.completed", { message: { role: "assistant", content: "second answer" } });
      w.reply(OVER_CAP);
    },
  }),
});
const { say, sentTo } = bot;

describe("a reply replayed from the ledger of a run failed past RUN_MAX_MESSAGES", () => {
  it("shows the messages before the cap, never the one past it", async () => {
    const chat = "-1008803";
    // The final write reaches the database, which applies it after the Worker gave up waiting (DB_QUERY_TIMEOUT_MS);
    // the host's fallback end lands after it: it finds the run ended, and replays its ledger.
    await holdFinalWriteThenHostFailureEnd(bot.host, OVER_CAP, async () => expect((await say(chat, "go")).status).toBe(200), 1_000);
    const [run] = await waitFor(async () => {
      const rows = await bot.host.query<{ run_id: string; status: string; error_code: string | null }>("SELECT run_id, status, error_code FROM run WHERE conversation_id = ?", [chat]);
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
