/**
 * Telegram messages with neither words nor a file. README (Platform input): a location, a venue, a contact, a poll, a
 * dice throw and a sticker read as words of their own, Telegram's object kept in `event.data` under its field's name;
 * a static sticker's picture comes as an image too. A story stays recorded and unanswered: the bot can read nothing of it.
 * A live location's stream of new positions (README "A message recalled or edited") costs no record of its own and
 * reaches its message at most once a minute, counted by triggers on the host's tables and the raw payloads in R2.
 */
import { beforeAll, describe, expect, it } from "vitest";
import type { ChatRunner, FakePlatform } from "../support/chat-host";
import type { TestHost } from "../support/host";
import { startChatRunner, telegramBotApi, waitFor } from "../support/fake-platform";
import { useTelegramBotHost } from "../support/telegram-bot-host";

const BOT_TOKEN = "123456:NOTEXT-telegram-bot-token-abcdef";
const SECRET_TOKEN = "notext-tg-secret-token";

const bot = useTelegramBotHost({ agentId: "tg-no-text", botToken: BOT_TOKEN, secretToken: SECRET_TOKEN, api: telegramBotApi(BOT_TOKEN), startRunner: () => startChatRunner("tg-no-text") });
let host: TestHost;
let fake: FakePlatform;
let runner: ChatRunner;
let botId: string;
let webhookUrl: string;
beforeAll(() => void ({ host, fake, runner, botId, webhookUrl } = bot));

let updateId = 7000;
/** Ada sends `content` in a private chat of its own; answers the update's id. */
async function send(chat: number, content: Record<string, unknown>): Promise<number> {
  const id = ++updateId;
  const message = { message_id: id, date: Math.floor(Date.now() / 1000), chat: { id: chat, type: "private" }, from: { id: 42, is_bot: false, first_name: "Ada" }, ...content };
  const res = await fetch(webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": SECRET_TOKEN }, body: JSON.stringify({ update_id: id, message }) });
  expect(res.status).toBe(200);
  return id;
}

/** Ada's edit of her message `messageId` in `chat`, now saying `content` (Telegram sends a live location's every new position so). */
async function edit(chat: number, messageId: number, editDate: number, content: Record<string, unknown>): Promise<number> {
  const id = ++updateId;
  const edited = { message_id: messageId, date: editDate - 100, edit_date: editDate, chat: { id: chat, type: "private" }, from: { id: 42, is_bot: false, first_name: "Ada" }, ...content };
  const res = await fetch(webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": SECRET_TOKEN }, body: JSON.stringify({ update_id: id, edited_message: edited }) });
  expect(res.status).toBe(200);
  return id;
}

/**
 * What a chat's messages cost from now on, counted by triggers on the host's own tables: EventLog rows written and
 * rewritten, transcript items rewritten (each a full-text index update too).
 */
async function countWrites(chat: number): Promise<() => Promise<Record<string, number>>> {
  const table = `writes_${chat}`;
  await host.query(`CREATE TABLE ${table} (what TEXT)`);
  for (const [what, on] of [["event_log insert", "INSERT ON event_log"], ["event_log update", "UPDATE ON event_log"], ["transcript update", "UPDATE ON transcript"]]) {
    await host.query(`CREATE TRIGGER ${table}_${what.replace(" ", "_")} AFTER ${on} WHEN NEW.conversation_id = '${chat}'${what.startsWith("transcript") ? " AND NEW.role = 'user'" : ""} BEGIN INSERT INTO ${table} VALUES ('${what}'); END`);
  }
  return async () => Object.fromEntries((await host.query<{ what: string; n: number }>(`SELECT what, COUNT(*) AS n FROM ${table} GROUP BY what`)).map((r) => [r.what, Number(r.n)]));
}
const rawPayloads = async () => (await host.r2Keys(`raw/telegram/${encodeURIComponent(botId)}/`)).length;
const itemOf = async (chat: number) => (await host.query<{ content: string }>("SELECT content FROM transcript WHERE conversation_id = ? AND role = 'user'", [String(chat)]))[0].content;

const runIn = (chat: number) => waitFor(() => runner.contexts.find((c) => c.conversation.conversation_id === String(chat)), 15_000, `the run in chat ${chat}`);
const answeredIn = (chat: number) => waitFor(() => fake.callsTo(/\/sendMessage$/).find((c) => String(c.body.chat_id) === String(chat)), 15_000, `the answer in chat ${chat}`);

describe("Telegram: messages without words", () => {
  it("reads a location, a venue and a contact as words, keeping Telegram's object in event.data, and answers them", async () => {
    const location = { latitude: 48.858844, longitude: 2.294351 };
    await send(7101, { location });
    const venue = { location, title: "Eiffel Tower", address: "Champ de Mars, Paris" };
    await send(7102, { venue, location });
    const contact = { phone_number: "+44 20 7946 0000", first_name: "Charles", last_name: "Babbage", user_id: 77 };
    await send(7103, { contact });

    const [loc, ven, con] = await Promise.all([runIn(7101), runIn(7102), runIn(7103)]);
    expect(loc.input.text).toBe("📍 Location: 48.858844, 2.294351");
    expect(loc.event.data).toMatchObject({ location, raw_text: null });
    expect(ven.input.text).toBe("📍 Location: 48.858844, 2.294351 (Eiffel Tower, Champ de Mars, Paris)");
    expect(ven.event.data.venue).toEqual(venue);
    expect(con.input.text).toBe("👤 Contact: Charles Babbage, +44 20 7946 0000");
    expect(con.event.data.contact).toEqual(contact);
    expect((await answeredIn(7101)).body.text).toBe("echo: 📍 Location: 48.858844, 2.294351");
  });

  it("reads a poll as its question and options (with the votes once anyone voted) and a dice throw as its value", async () => {
    const poll = { id: "p1", question: "Lunch?", options: [{ text: "Pizza", voter_count: 2 }, { text: "Sushi", voter_count: 1 }], total_voter_count: 3, is_closed: false, is_anonymous: true, type: "regular", allows_multiple_answers: true };
    await send(7201, { poll });
    const quiz = { id: "p2", question: "2 + 2?", options: [{ text: "4", voter_count: 0 }, { text: "5", voter_count: 0 }], total_voter_count: 0, is_closed: true, is_anonymous: true, type: "quiz", allows_multiple_answers: false, correct_option_id: 0 };
    await send(7202, { poll: quiz });
    await send(7203, { dice: { emoji: "🎲", value: 4 } });

    const [p, q, d] = await Promise.all([runIn(7201), runIn(7202), runIn(7203)]);
    expect(p.input.text).toBe("📊 Poll: Lunch? (multiple answers)\n- Pizza (2 votes)\n- Sushi (1 votes)");
    expect(p.event.data.poll).toEqual(poll);
    expect(q.input.text).toBe("📊 Quiz: 2 + 2? (closed)\n- 4\n- 5");
    expect(d.input.text).toBe("🎲 Dice: 4");
    expect(d.event.data.dice).toEqual({ emoji: "🎲", value: 4 });
  });

  it("reads a sticker as its emoji; a static one's picture comes as an image too, an animated one's does not", async () => {
    const still = { file_id: "sticker-still", file_unique_id: "u1", type: "regular", width: 512, height: 512, is_animated: false, is_video: false, emoji: "😂", set_name: "Funny" };
    await send(7301, { sticker: still });
    const animated = { ...still, file_id: "sticker-anim", is_animated: true, emoji: "👍" };
    await send(7302, { sticker: animated });

    const [s, a] = await Promise.all([runIn(7301), runIn(7302)]);
    expect(s.input.text).toBe("Sticker: 😂");
    expect(s.event.data.sticker).toEqual(still);
    expect(s.input.attachments).toEqual([expect.objectContaining({ artifact_type: "image", mime_type: "image/webp" })]);
    expect(fake.callsTo(/\/getFile$/).map((c) => c.body.file_id)).toEqual(["sticker-still"]);
    expect(await host.r2Object(`artifacts/${s.input.attachments[0].artifact_id}`)).toEqual(new TextEncoder().encode("bytes of photos/sticker-still.jpg"));
    expect(a.input.text).toBe("Sticker: 👍");
    expect(a.input.attachments).toEqual([]);
  });

  it("reads the message a reply answers the same: a poll's words in reply_to.text, a static sticker's picture among its files", async () => {
    const poll = { id: "p3", question: "Lunch?", options: [{ text: "Pizza", voter_count: 0 }, { text: "Sushi", voter_count: 0 }], total_voter_count: 0, is_closed: false, is_anonymous: true, type: "regular", allows_multiple_answers: false };
    const from = { id: 43, is_bot: false, first_name: "Bob" };
    await send(7501, { text: "which one?", reply_to_message: { message_id: 1, date: 1, chat: { id: 7501, type: "private" }, from, poll } });
    const sticker = { file_id: "sticker-replied", file_unique_id: "u2", type: "regular", width: 512, height: 512, is_animated: false, is_video: false, emoji: "🙂" };
    await send(7502, { text: "what is this?", reply_to_message: { message_id: 2, date: 1, chat: { id: 7502, type: "private" }, from, sticker } });

    const [p, s] = await Promise.all([runIn(7501), runIn(7502)]);
    expect(p.event.data.reply_to).toMatchObject({ message_id: 1, text: "📊 Poll: Lunch?\n- Pizza\n- Sushi", attachments: [] });
    expect(s.event.data.reply_to).toMatchObject({ message_id: 2, text: "Sticker: 🙂", attachments: [expect.objectContaining({ mime_type: "image/webp" })] });
    expect(s.input.attachments).toEqual([expect.objectContaining({ artifact_type: "image", mime_type: "image/webp" })]);
  });

  it("keeps a live location's stream of positions cheap: no record or payload of their own, the message's words at most once a minute, the last position when it stops", async () => {
    const chat = 7601;
    const id = await send(chat, { location: { latitude: 48.8584, longitude: 2.2945, live_period: 900 } });
    expect((await runIn(chat)).input.text).toBe("📍 Location: 48.8584, 2.2945 (live)");
    await answeredIn(chat);
    await waitFor(async () => (await host.query("SELECT 1 FROM run WHERE conversation_id = ? AND status = 'completed'", [String(chat)])).length > 0, 15_000, "the run's end");
    // The answer's delivery record is written off its path, after the send: counted from here, it would look like the positions' writes.
    await waitFor(async () => (await host.query("SELECT 1 FROM event_log WHERE conversation_id = ? AND event_type = 'delivery.succeeded'", [String(chat)])).length > 0, 15_000, "the answer's delivery record");
    const writes = await countWrites(chat);
    const raw = await rawPayloads();
    // Ten positions within a minute, as a phone sends them: the first one becomes the message's words, the rest cost nothing.
    const t0 = Math.floor(Date.now() / 1000);
    for (let i = 1; i <= 10; i++) await edit(chat, id, t0 + i, { location: { latitude: 48.8584 + i / 1000, longitude: 2.2945, live_period: 900, heading: 90 } });
    expect({ writes: await writes(), raw: (await rawPayloads()) - raw }).toEqual({ writes: { "transcript update": 1, "event_log update": 1 }, raw: 0 });
    expect(await itemOf(chat)).toBe("📍 Location: 48.8594, 2.2945 (live)");
    // A minute after the last one applied, the next one is.
    await edit(chat, id, t0 + 61, { location: { latitude: 48.87, longitude: 2.2945, live_period: 900 } });
    expect({ writes: await writes(), raw: (await rawPayloads()) - raw }).toEqual({ writes: { "transcript update": 2, "event_log update": 2 }, raw: 0 });
    expect(await itemOf(chat)).toBe("📍 Location: 48.87, 2.2945 (live)");
    // Stopped (Telegram's last edit has no live_period): recorded as any edit, and the last position is the message's, however soon.
    await edit(chat, id, t0 + 63, { location: { latitude: 48.871, longitude: 2.2946 } });
    expect({ writes: await writes(), raw: (await rawPayloads()) - raw }).toEqual({ writes: { "event_log insert": 1, "transcript update": 3, "event_log update": 3 }, raw: 1 });
    expect(await itemOf(chat)).toBe("📍 Location: 48.871, 2.2946");
    const [record] = await host.query<{ metadata_json: string }>("SELECT metadata_json FROM event_log WHERE event_id = ?", [`telegram:${botId}:${id}`]);
    expect(JSON.parse(record.metadata_json).edited).toMatchObject({ version: t0 + 63, input_summary: "📍 Location: 48.871, 2.2946" });
    // Nothing of it ever ran again.
    expect(runner.contexts.filter((c) => c.conversation.conversation_id === String(chat))).toHaveLength(1);
  });

  it("asks a run waiting with a live location about its new positions only when one reaches the message: it runs with the words its history holds", async () => {
    const chat = 7602;
    await send(chat, { text: `stream ${"word ".repeat(20).trim()}` });
    await runIn(chat);
    // Shared while the chat's first run streams: it waits its turn, and its positions arrive meanwhile.
    const id = await send(chat, { location: { latitude: 10, longitude: 20, live_period: 900 } });
    const t0 = Math.floor(Date.now() / 1000);
    for (let i = 1; i <= 10; i++) await edit(chat, id, t0 + i, { location: { latitude: 10 + i, longitude: 20, live_period: 900 } });
    const waited = await waitFor(() => runner.contexts.find((c) => c.conversation.conversation_id === String(chat) && c.input.text.startsWith("📍")), 15_000, "the location's run");
    expect(waited.input.text).toBe("📍 Location: 11, 20 (live)");
    expect(await host.query("SELECT content FROM transcript WHERE conversation_id = ? AND role = 'user' AND content LIKE '📍%'", [String(chat)])).toEqual([{ content: "📍 Location: 11, 20 (live)" }]);
  });

  it("records a story without answering it: the bot can read nothing of it", async () => {
    const id = await send(7401, { story: { chat: { id: 5, type: "private" }, id: 9 } });
    const [row] = await waitFor(() => host.query<{ event_type: string; source_event_type: string; conversation_id: string }>("SELECT event_type, source_event_type, conversation_id FROM event_log WHERE event_id = ?", [`telegram:${botId}:${id}`]).then((rows) => rows.length > 0 && rows), 15_000, "the record");
    expect(row).toEqual({ event_type: "platform.unhandled", source_event_type: "message", conversation_id: "7401" });
    // A message sent after it is answered, and is the only one the chat's runs saw.
    await send(7401, { location: { latitude: 1, longitude: 2 } });
    await answeredIn(7401);
    expect(runner.contexts.filter((c) => c.conversation.conversation_id === "7401").map((c) => c.input.text)).toEqual(["📍 Location: 1, 2"]);
  });
});
