import { describe, expect, it } from "vitest";
import { ANSWER_FILE, telegramBotApi, waitFor } from "../support/fake-platform";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { useTelegramBotHost } from "../support/telegram-bot-host";

/**
 * A media type is case-insensitive and may carry parameters (RFC 2045/6838; README: "`Image/PNG` is an image ... for
 * delivery"). Telegram shows a PNG image as a photo (README, Delivery: "Telegram sends images as photos"), whether the
 * runner wrote its type `image/png`, `Image/PNG` or `image/png; name=chart`.
 */
const BOT_TOKEN = "123456:TEST-telegram-bot-token-mimecase";
const SECRET_TOKEN = "tg-secret-token-mimecase-0123456789";
const bot = useTelegramBotHost({
  agentId: "mime-case",
  botToken: BOT_TOKEN,
  secretToken: SECRET_TOKEN,
  botName: "tg",
  api: telegramBotApi(BOT_TOKEN),
  startRunner: () => startAdHocRunner({
    name: "mime-case",
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      const mime = String(ctx.input.text);
      w.send("artifact.created", { artifact_type: "image", mime_type: mime, name: "chart.png", content_base64: ANSWER_FILE.toString("base64") });
      w.reply("here is the chart");
    },
  }),
});

let updateId = 9100;
async function say(chat: string, text: string) {
  const id = ++updateId;
  const message = { message_id: id, date: Math.floor(Date.now() / 1000), chat: { id: Number(chat), type: "group", title: "g" }, from: { id: 42, is_bot: false, first_name: "Ada" }, text };
  const res = await fetch(bot.webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": SECRET_TOKEN }, body: JSON.stringify({ update_id: id, message }) });
  expect(res.status).toBe(200);
}

const fileMethod = (chat: string) => {
  const call = bot.fake.callsTo(/\/send(Photo|Document)$/).find((c) => c.raw.includes(`\r\n\r\n${chat}\r\n`));
  return call && /\/(send\w+)$/.exec(call.path)![1];
};

describe("an image answer on Telegram", () => {
  it.each([
    ["-1009101", "image/png"],
    ["-1009102", "Image/PNG"],
    ["-1009103", "image/png; name=chart"],
  ])("chat %s: an image typed %s goes as a photo", async (chat, mime) => {
    await say(chat, mime);
    expect(await waitFor(() => fileMethod(chat), 15_000, "the file's post")).toBe("sendPhoto");
  });
});
