import { beforeAll, describe, expect, it } from "vitest";
import type { FakePlatform } from "../support/chat-host";
import type { TestHost } from "../support/host";
import { waitFor } from "../support/fake-platform";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { useTelegramBotHost } from "../support/telegram-bot-host";

/**
 * A chat reply shows what the host recorded, and survives a database that
 * fails once when the reply loads its bot.
 */
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const bot = useTelegramBotHost({
  agentId: "delivery-edges",
  startRunner: () => startAdHocRunner({
    name: "delivery-edges",
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      if (ctx.input.text === "image only") {
        w.send("message.completed", { message: { role: "assistant", content: [{ type: "image", url: "https://example.com/chart.png" }] } });
        w.send("run.completed", { finish_reason: "stop", message: { role: "assistant", content: "the final answer" } });
        return void res.end();
      }
      // `flood N`: N messages (each streamed first, when `streamed`), more than a chat is shown.
      const flood = /^(streamed )?flood (\d+)$/.exec(ctx.input.text);
      if (flood) {
        for (let i = 1; i <= Number(flood[2]); i++) {
          if (flood[1]) w.send("message.delta", { chunk: { role: "assistant", content: `message ${i}` } });
          w.send("message.completed", { message: { role: "assistant", content: `message ${i}` } });
        }
        w.send("run.completed", { finish_reason: "stop" });
        return void res.end();
      }
      // `files N then M`: N files announced, a message they go with, then M more files after it.
      const files = /^files (\d+) then (\d+)$/.exec(ctx.input.text);
      if (files) {
        const file = (i: number) => ({ artifact_type: "file", mime_type: "text/plain", name: `f${i}.txt`, content_base64: Buffer.from(`file ${i}`).toString("base64") });
        for (let i = 1; i <= Number(files[1]); i++) w.send("artifact.created", file(i));
        w.send("message.completed", { message: { role: "assistant", content: "the files" } });
        for (let i = 1; i <= Number(files[2]); i++) w.send("artifact.created", file(Number(files[1]) + i));
        w.send("run.completed", { finish_reason: "stop" });
        return void res.end();
      }
      // Holds the conversation a while, so the next message waits its turn.
      if (ctx.input.text === "slow") await sleep(2_000);
      w.reply(`answer to ${ctx.input.text}`);
    },
  }),
});
const { sentTo } = bot;
let host: TestHost;
let fake: FakePlatform;
beforeAll(() => void ({ host, fake } = bot));

const say = async (chat: string, text: string) => expect((await bot.say(chat, text)).status).toBe(200);

describe("chat delivery", () => {
  it("shows run.completed's final message after one of the run's own, as the transcript keeps it, when that one shows no text", async () => {
    const chat = "-100990";
    await say(chat, "image only");
    const [sent] = await waitFor(() => sentTo(chat).length > 0 && sentTo(chat), 10_000, "the reply");
    const [run] = await host.query<{ run_id: string }>("SELECT run_id FROM run WHERE conversation_id = ?", [chat]);
    const view = await host.waitForRun(run.run_id);
    expect(view.message).toEqual({ role: "assistant", content: "the final answer" });
    // The first shows nothing here (an image by URL), so the final answer is all the chat gets: no notice in its place.
    expect(sent).toBe("the final answer");
    await new Promise((r) => setTimeout(r, 300));
    expect(sentTo(chat)).toEqual(["the final answer"]);
  });

  it("asks the database again when loading the reply's bot fails once: the answer still reaches the chat", async () => {
    const chat = "-100880";
    await say(chat, "slow");
    await say(chat, "second");
    // The next read of the bot's row (the queued run's reply, as it starts) fails, as a timeout would.
    host.databaseOutage({ queries: 1, matching: 'from \\"bot\\"' });
    await waitFor(() => sentTo(chat).length === 2, 20_000, "both answers");
    expect(sentTo(chat)).toEqual(["answer to slow", "answer to second"]);
    const [, second] = await host.query<{ run_id: string }>("SELECT run_id FROM run WHERE conversation_id = ? ORDER BY created_at", [chat]);
    const trail = (await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE run_id = ? AND event_type = 'delivery.failed'", [second.run_id])).map((r) => JSON.parse(r.data_json));
    expect(trail).toEqual([expect.objectContaining({ operation: "connect", attempt: 1, code: "bot_not_loaded", will_retry: true })]);
  });

  it("shows at most DELIVERY_MAX_PARTS (20) messages of a run, then says once how many more it sent, streamed or not", async () => {
    const shown = Array.from({ length: 20 }, (_, i) => `message ${i + 1}`);
    for (const [chat, text] of [["-100770", "flood 45"], ["-100771", "streamed flood 45"]]) {
      await say(chat, text);
      const notice = "(25 more messages of this answer are not shown here.)";
      await waitFor(() => sentTo(chat).includes(notice), 20_000, `the notice in ${chat}`);
      await new Promise((r) => setTimeout(r, 300));
      expect(sentTo(chat)).toEqual([...shown, notice]);
      // The run keeps them all.
      const [run] = await host.query<{ run_id: string }>("SELECT run_id FROM run WHERE conversation_id = ?", [chat]);
      expect((await host.query("SELECT 1 FROM transcript WHERE run_id = ? AND role = 'assistant'", [run.run_id])).length).toBe(45);
    }
  });

  it("sends at most DELIVERY_MAX_PARTS (20) files of a run, then says once how many more it made, wherever they were announced", async () => {
    const chat = "-100772";
    const documentsTo = () => fake.callsTo(/\/sendDocument$/).filter((c) => /name="chat_id"\r\n\r\n([^\r]*)/.exec(c.raw)?.[1] === chat).map((c) => /filename="([^"]+)"/.exec(c.raw)?.[1]);
    await say(chat, "files 15 then 30");
    const notice = "(25 more files of this answer are not shown here.)";
    await waitFor(() => sentTo(chat).includes(notice), 20_000, "the notice");
    await new Promise((r) => setTimeout(r, 300));
    expect(sentTo(chat)).toEqual(["the files", notice]);
    expect(documentsTo()).toEqual(Array.from({ length: 20 }, (_, i) => `f${i + 1}.txt`));
    // The run keeps them all.
    const [run] = await host.query<{ run_id: string }>("SELECT run_id FROM run WHERE conversation_id = ?", [chat]);
    expect((await host.query("SELECT 1 FROM artifact WHERE run_id = ?", [run.run_id])).length).toBe(45);
  });
});
