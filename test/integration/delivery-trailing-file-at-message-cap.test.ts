import { describe, expect, it } from "vitest";
import { waitFor } from "../support/fake-platform";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { useTelegramBotHost } from "../support/telegram-bot-host";

/**
 * Commit 6c29976 (ShownCap): a run shows at most DELIVERY_MAX_PARTS of its messages "and at most that many of its
 * files, and after its end one more message says how many of each it sent beyond them" (README, Delivery). A run
 * that sends exactly DELIVERY_MAX_PARTS messages and then announces one file (announced after its last message: sent
 * on its own) never sent a message beyond the cap, yet the files-alone reply is counted by ShownCap as a message
 * cut: the chat is told "(1 more message and 1 more file of this answer are not shown here.)".
 */
const bot = useTelegramBotHost({
  agentId: "cap-trailing-file",
  vars: { DELIVERY_MAX_PARTS: "3" },
  startRunner: () => startAdHocRunner({
    name: "cap-trailing-file",
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      for (let i = 1; i <= 3; i++) w.send("message.completed", { message: { role: "assistant", content: `message ${i}` } });
      w.send("artifact.created", { artifact_type: "file", mime_type: "text/plain", name: "report.txt", content_base64: Buffer.from("report").toString("base64") });
      w.send("run.completed", { finish_reason: "stop" });
      res.end();
    },
  }),
});
const { say, sentTo } = bot;

describe("a run at exactly DELIVERY_MAX_PARTS messages with one file after them", () => {
  it("never tells the chat a message was not shown: every message it sent was", async () => {
    const chat = "-100661";
    expect((await say(chat, "go")).status).toBe(200);
    const [run] = await waitFor(async () => {
      const rows = await bot.host.query<{ run_id: string }>("SELECT run_id FROM run WHERE conversation_id = ?", [chat]);
      return rows.length > 0 && rows;
    }, 10_000, "the run");
    await bot.host.waitForRun(run.run_id);
    await waitFor(() => sentTo(chat).length >= 3, 10_000, "the messages");
    await new Promise((r) => setTimeout(r, 1_000));
    const sent = sentTo(chat);
    expect(sent.slice(0, 3)).toEqual(["message 1", "message 2", "message 3"]);
    expect(sent.filter((t) => /more message/.test(t))).toEqual([]);
    // The file is within the files' own cap (none shown yet): it reaches the chat.
    const documents = bot.fake.callsTo(/\/sendDocument$/).filter((c) => /name="chat_id"\r\n\r\n([^\r]*)/.exec(c.raw)?.[1] === chat);
    expect(documents).toHaveLength(1);
  });
});
