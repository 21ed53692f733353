/**
 * A Telegram message whose photo its user replaced (an `edited_message` naming another file): the file stored for it
 * goes as a recalled message's files do (README "A message recalled or edited"), its artifact expired and its bytes
 * deleted; an edit of its caption alone keeps it.
 */
import { describe, expect, it } from "vitest";
import { startChatRunner, telegramBotApi, waitFor } from "../support/fake-platform";
import { useTelegramBotHost } from "../support/telegram-bot-host";

const BOT_TOKEN = "123456:PHOTO-telegram-bot-token-abcdef";
const SECRET_TOKEN = "photo-tg-secret-token";

const bot = useTelegramBotHost({
  agentId: "tg-photo-replaced",
  botToken: BOT_TOKEN,
  secretToken: SECRET_TOKEN,
  api: telegramBotApi(BOT_TOKEN),
  startRunner: () => startChatRunner("tg-photo-replaced"),
});

let updateId = 9100;
const ada = { id: 42, is_bot: false, first_name: "Ada" };
/** Telegram's sizes of one photo, the largest last, each with its file_id and lasting file_unique_id. */
const photo = (name: string) => [
  { file_id: `${name}-small`, file_unique_id: `${name}-small-u`, width: 90, height: 90 },
  { file_id: name, file_unique_id: `${name}-u`, width: 800, height: 800 },
];

async function deliver(kind: "message" | "edited_message", message: Record<string, unknown>): Promise<void> {
  const res = await fetch(bot.webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": SECRET_TOKEN }, body: JSON.stringify({ update_id: ++updateId, [kind]: message }) });
  expect(res.status).toBe(200);
}

async function artifactOf(artifactId: string) {
  const [row] = await bot.host.query<{ expires_at: number | null; metadata_json: string }>("SELECT expires_at, metadata_json FROM artifact WHERE artifact_id = ?", [artifactId]);
  return { expired: row.expires_at !== null && row.expires_at <= Date.now(), metadata: JSON.parse(row.metadata_json), bytes: await bot.host.r2Object(`artifacts/${artifactId}`) };
}

describe("Telegram: a message's photo replaced by its user", () => {
  it("expires the replaced photo's artifact and deletes its bytes; a caption edited alone keeps it", async () => {
    const chat = { id: 5150, type: "private" };
    const date = Math.floor(Date.now() / 1000);
    await deliver("message", { message_id: 77, date, chat, from: ada, photo: photo("ph-first"), caption: "look at this" });
    const ctx = await waitFor(() => bot.runner.contexts.find((c) => c.input.text === "look at this"), 15_000, "the photo's run");
    const artifactId: string = ctx.input.attachments[0].artifact_id;
    const stored = await artifactOf(artifactId);
    expect(stored).toMatchObject({ expired: false, metadata: { platform_file_id: "ph-first-u" } });
    expect(new TextDecoder().decode(stored.bytes!)).toBe("bytes of photos/ph-first.jpg");

    // The caption edited, the photo as it was: the file stays.
    await deliver("edited_message", { message_id: 77, date, edit_date: date + 5, chat, from: ada, photo: photo("ph-first"), caption: "look at this one" });
    expect(await artifactOf(artifactId)).toMatchObject({ expired: false, bytes: expect.anything() });

    // Another photo in its place: the first is gone, as a recalled message's file is.
    await deliver("edited_message", { message_id: 77, date, edit_date: date + 10, chat, from: ada, photo: photo("ph-second"), caption: "look at this one" });
    expect(await artifactOf(artifactId)).toMatchObject({ expired: true, bytes: null });
    // Nothing was fetched for the edit: an edit is recorded, not answered.
    expect(bot.fake.calls.filter((c) => c.path.endsWith("/getFile")).map((c) => c.body.file_id)).toEqual(["ph-first"]);
  });
});
