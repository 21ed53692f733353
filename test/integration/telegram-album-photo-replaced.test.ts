import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../support/fake-platform";
import { startTelegramChat } from "../support/telegram-chat";

/**
 * A photo replaced on an item of an album whose run still gathers it (README "A message recalled or edited"): the
 * replaced photo's artifact has expired (a runner reading it would get a 404), so the album's run starts without it,
 * whether the item is the one the run was made for or one merged into it, and an item joining later brings it back
 * no more; the other items' photos stay, in order.
 */
let chat: Awaited<ReturnType<typeof startTelegramChat>>;
let updateId = 61_000;

beforeAll(async () => {
  // Long enough a wait for the edits to reach the album's run before it begins.
  chat = await startTelegramChat("album-replaced", { vars: { ALBUM_WAIT_MS: "4000" } });
});
afterAll(async () => {
  await chat?.dispose();
});

const chatId = "-881001";
const date = Math.floor(Date.now() / 1000);

/** Item `messageId` of the album, its photo `photo` (a lasting file_unique_id each), edited at `editDate` when given. */
function item(messageId: number, photo: string, opts: { caption?: string; editDate?: number } = {}) {
  const message = {
    message_id: messageId,
    date,
    ...(opts.editDate ? { edit_date: opts.editDate } : {}),
    chat: { id: Number(chatId), type: "supergroup", title: "Album group" },
    from: { id: 42, is_bot: false, first_name: "Ada" },
    media_group_id: "album-replaced",
    photo: [{ file_id: photo, file_unique_id: `${photo}-u`, width: 800, height: 800 }],
    ...(opts.caption === undefined ? {} : { caption: opts.caption }),
  };
  return { update_id: ++updateId, [opts.editDate ? "edited_message" : "message"]: message };
}

async function post(update: unknown): Promise<void> {
  const res = await fetch(chat.webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": chat.secretToken }, body: JSON.stringify(update) });
  await res.text();
  expect(res.status).toBe(200);
}

const artifactOf = async (photo: string) =>
  (await chat.host.query<{ artifact_id: string }>("SELECT artifact_id FROM artifact WHERE json_extract(metadata_json, '$.platform_file_id') = ?", [`${photo}-u`]))[0].artifact_id;

describe("a Telegram album gathering: an item's photo replaced", () => {
  it("leaves the album's run without the replaced photo, for the item the run was made for and for one merged into it", async () => {
    // 501 arrives first (its run gathers the album), 502 and 503 join it.
    for (const [messageId, photo, caption] of [[501, "alb-501"], [502, "alb-502", "our trip"], [503, "alb-503"]] as const) await post(item(messageId, photo, { caption }));
    const [first, merged, kept] = [await artifactOf("alb-501"), await artifactOf("alb-502"), await artifactOf("alb-503")];
    const events = await chat.host.query<{ disposition: string }>("SELECT disposition FROM event_log WHERE conversation_id = ? AND event_type = 'message.received' ORDER BY seq", [chatId]);
    expect(events.map((e) => e.disposition)).toEqual(["bound", "merged", "merged"]);
    expect(chat.runner.contexts.filter((c) => c.conversation.conversation_id === chatId)).toEqual([]);

    // Both photos replaced while the run still waits for more items, one more joining in between (the run's input is
    // made again from its items then).
    await post(item(501, "alb-501-new", { editDate: date + 1 }));
    await post(item(504, "alb-504"));
    await post(item(502, "alb-502-new", { caption: "our trip", editDate: date + 2 }));
    const joined = await artifactOf("alb-504");

    const ctx = await waitFor(() => chat.runner.contexts.find((c) => c.conversation.conversation_id === chatId), 20_000, "the album's run");
    const ids = (els: { artifact_id?: string }[]) => els.flatMap((el) => (el.artifact_id ? [el.artifact_id] : []));
    expect(ids(ctx.input.attachments)).toEqual([kept, joined]);
    expect(ids(ctx.input.contents)).toEqual([kept, joined]);
    expect(ctx.input.text).toBe("our trip");
    expect(JSON.stringify(ctx.input)).not.toContain(first);
    expect(JSON.stringify(ctx.input)).not.toContain(merged);
  }, 40_000);
});
