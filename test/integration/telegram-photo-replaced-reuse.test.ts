/**
 * README (Replies): a replied message's file the bot stored is re-used by the reply, its expiry moved to the reply's,
 * never revived once expired. A Telegram message's photo its user replaced expires with its bytes deleted (README "A
 * message recalled or edited"): a reply re-using that photo, stored while the edit landed, does not bring it back.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { deferred } from "../support/host-api";
import { addTelegramBot, startChatRunner, startFakePlatform, telegramBotApi, waitFor } from "../support/fake-platform";

const BOT_TOKEN = "123456:REUSE-telegram-bot-token-abcdef";
const SECRET_TOKEN = "reuse-tg-secret-token";

let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startChatRunner>>;
let webhookUrl: string;
/** Downloads of these file paths wait until the test lets them go. */
const heldFiles = new Map<string, ReturnType<typeof deferred<void>>>();

beforeAll(async () => {
  const botApi = telegramBotApi(BOT_TOKEN);
  fake = await startFakePlatform(async (call) => {
    await heldFiles.get(call.path.split("/").slice(-2).join("/"))?.promise;
    return botApi(call);
  });
  runner = await startChatRunner("tg-photo-reuse");
  host = await startTestHost();
  ({ webhookUrl } = await addTelegramBot(host, { apiBaseUrl: fake.url, botToken: BOT_TOKEN, secretToken: SECRET_TOKEN }, { runner, agentId: "tg-photo-reuse" }));
});
afterAll(async () => {
  for (const gate of heldFiles.values()) gate.resolve();
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

let updateId = 9300;
const ada = { id: 42, is_bot: false, first_name: "Ada" };
const photo = (name: string) => [{ file_id: name, file_unique_id: `${name}-u`, width: 800, height: 800 }];
const deliver = (kind: "message" | "edited_message", message: Record<string, unknown>) =>
  fetch(webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": SECRET_TOKEN }, body: JSON.stringify({ update_id: ++updateId, [kind]: message }) });

describe("Telegram: a replaced photo a reply re-used", () => {
  it("stays expired, its bytes gone, when the photo was replaced while the reply was being stored", async () => {
    const chat = { id: 5160, type: "private" };
    const date = Math.floor(Date.now() / 1000);
    const root = { message_id: 81, date, chat, from: ada, photo: photo("ph-root"), caption: "the first one" };
    expect((await deliver("message", root)).status).toBe(200);
    const rootRun = await waitFor(() => runner.contexts.find((c) => c.input.text === "the first one"), 15_000, "the photo's run");
    const reused: string = rootRun.input.attachments[0].artifact_id;

    // A reply with a photo of its own, which is still downloading when the replied message's photo is replaced.
    const gate = deferred();
    heldFiles.set("photos/ph-reply.jpg", gate);
    const replying = deliver("message", { message_id: 82, date, chat, from: ada, photo: photo("ph-reply"), caption: "and this", reply_to_message: root });
    await waitFor(() => fake.calls.some((c) => c.path.endsWith("/photos/ph-reply.jpg")), 10_000, "the reply's own photo asked for");
    expect((await deliver("edited_message", { ...root, edit_date: date + 5, photo: photo("ph-other") })).status).toBe(200);
    gate.resolve();
    expect((await replying).status).toBe(200);
    const replyRun = await waitFor(() => runner.contexts.find((c) => c.input.text === "and this"), 15_000, "the reply's run");
    expect(replyRun.event.data.reply_to.attachments.map((a: { artifact_id: string }) => a.artifact_id)).toEqual([reused]);

    const [row] = await host.query<{ expires_at: number | null; metadata_json: string }>("SELECT expires_at, metadata_json FROM artifact WHERE artifact_id = ?", [reused]);
    expect(JSON.parse(row.metadata_json)).toMatchObject({ platform_file_id: "ph-root-u", replaced_at: expect.any(String) });
    expect(row.expires_at).not.toBeNull();
    expect(row.expires_at!).toBeLessThanOrEqual(Date.now());
    expect(await host.r2Object(`artifacts/${reused}`)).toBeNull();
  });
});
