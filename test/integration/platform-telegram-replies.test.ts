import { beforeAll, describe, expect, it } from "vitest";
import { addTelegramBot, longText, waitFor } from "../support/fake-platform";
import { useTelegramPlatform, type TelegramPlatform } from "../support/telegram-platform";

/** What a Telegram message gives the runner: its text without the bot's own mentions, the message a reply answers. */
const platform = useTelegramPlatform();
const { state, PHOTO, OUR_USERNAME, NO_GETME_TOKEN, FORGED_LINE, update, post, sendsTo, contextFor } = platform;
let host: TelegramPlatform["host"];
let fake: TelegramPlatform["fake"];
let runner: TelegramPlatform["runner"];
let botId: string;
beforeAll(() => void ({ host, fake, runner, botId } = platform));

describe("Telegram: webhook in, reply out", () => {
  it("leaves its own leading @mention out of the text, as its name in a command: others', and one later in the message, stay; raw_text keeps what was sent", async () => {
    const mentioning = (text: string, length: number) => update("-101750", { text, entities: [{ type: "mention", offset: 0, length }] });
    const addressed = mentioning("@ourtestbot, what's new?", 11);
    for (const u of [addressed, mentioning("@OtherBot what's new?", 9), mentioning("@OurTestBot", 11), update("-101750", { text: "thanks @OurTestBot", entities: [{ type: "mention", offset: 7, length: 11 }] })]) expect((await post(u)).status).toBe(200);
    await waitFor(() => sendsTo("-101750").length >= 4, 15_000, "the answers");
    expect(sendsTo("-101750").map((c) => c.body.text)).toEqual(["echo: what's new?", "echo: @OtherBot what's new?", "echo: @OurTestBot", "echo: thanks @OurTestBot"]);
    const [ctx] = contextFor("what's new?");
    expect(ctx.event.data).toMatchObject({ message_id: addressed.message.message_id, raw_text: "@ourtestbot, what's new?" });
    // A link after the mention keeps its target where it is, its offset counted in the text as sent.
    const text = "@OurTestBot read the docs";
    await post(update("-101750", { text, entities: [{ type: "mention", offset: 0, length: 11 }, { type: "text_link", offset: 21, length: 4, url: "https://example.com/docs" }] }));
    await waitFor(() => sendsTo("-101750").some((c) => c.body.text === "echo: read the docs (https://example.com/docs)"), 15_000, "the linked message's answer");
  });

  it("gives the runner the message a reply answers, which the bot in a group never received: its sender, words and the part quoted; a topic's root is no reply", async () => {
    const bobs = { message_id: 31, date: 1_700_000_000, chat: { id: -101770, type: "supergroup" }, from: { id: 7, is_bot: false, first_name: "Bob" }, text: "Bonjour tout le monde", entities: [{ type: "text_link", offset: 0, length: 7, url: "https://fr.example" }] };
    const asking = update("-101770", { text: "@OurTestBot translate this", entities: [{ type: "mention", offset: 0, length: 11 }], reply_to_message: bobs, quote: { text: "Bonjour", position: 0 } });
    expect((await post(asking)).status).toBe(200);
    await waitFor(() => sendsTo("-101770").length > 0, 15_000, "the answer");
    const [ctx] = contextFor("translate this");
    expect(ctx.event.data).toMatchObject({
      reply_to_message_id: 31,
      reply_to: { message_id: 31, actor: { actor_type: "user", actor_id: "7", actor_name: "Bob" }, text: "Bonjour (https://fr.example) tout le monde", quote: "Bonjour" },
    });
    // In a forum topic, every message Telegram sends "replies" to the topic's opening: that says nothing.
    const opening = { message_id: 88, date: 1_700_000_000, chat: { id: -101771, type: "supergroup" }, message_thread_id: 88, is_topic_message: true, forum_topic_created: { name: "Ops", icon_color: 7322096 } };
    await post(update("-101771", { text: "in the topic", message_thread_id: 88, is_topic_message: true, reply_to_message: opening }));
    await post(update("-101771", { text: "no reply at all" }));
    // A reply the user chose in the topic is one.
    const carols = { message_id: 90, date: 1_700_000_000, chat: opening.chat, message_thread_id: 88, is_topic_message: true, from: { id: 8, is_bot: false, first_name: "Carol" }, text: "the build is red" };
    await post(update("-101771", { text: "since when?", message_thread_id: 88, is_topic_message: true, reply_to_message: carols }));
    await waitFor(() => sendsTo("-101771").length >= 3, 15_000, "the answers");
    expect(contextFor("in the topic")[0].event.data).toMatchObject({ reply_to_message_id: null, reply_to: null });
    expect(contextFor("no reply at all")[0].event.data).toMatchObject({ reply_to_message_id: null, reply_to: null });
    expect(contextFor("since when?")[0].event.data).toMatchObject({ reply_to_message_id: 90, reply_to: { message_id: 90, text: "the build is red" } });
  });

  it("gives the runner the files of the message a reply answers, after its own, named in reply_to.attachments and marked as the replied message's", async () => {
    // Bob posts a PDF; Ada replies to it with a photo of her own: "@OurTestBot compare these".
    const bobs = { message_id: 41, date: 1_700_000_000, chat: { id: -101780, type: "supergroup" }, from: { id: 7, is_bot: false, first_name: "Bob" }, caption: "Q3 report", document: { file_id: "bobs_pdf", file_name: "q3.pdf", mime_type: "application/pdf" } };
    const asking = update("-101780", { caption: "@OurTestBot compare these", caption_entities: [{ type: "mention", offset: 0, length: 11 }], photo: [{ file_id: "adas_photo", width: 800, height: 800 }], reply_to_message: bobs });
    expect((await post(asking)).status).toBe(200);
    await waitFor(() => sendsTo("-101780").length > 0, 15_000, "the answer");
    const [ctx] = contextFor("compare these");
    expect(fake.callsTo(/\/getFile$/).map((c) => c.body.file_id)).toEqual(expect.arrayContaining(["adas_photo", "bobs_pdf"]));
    const [own, replied] = ctx.input.attachments;
    expect(ctx.input.attachments).toHaveLength(2);
    expect(own).toMatchObject({ artifact_type: "image", mime_type: "image/jpeg" });
    expect(replied).toMatchObject({ artifact_type: "file", mime_type: "application/pdf", name: "q3.pdf", size_bytes: PHOTO.length });
    expect(ctx.event.data.reply_to).toEqual({ message_id: 41, actor: { actor_type: "user", actor_id: "7", actor_name: "Bob" }, text: "Q3 report", quote: null, attachments: [replied], unavailable: null });
    // A runner reading only contents sees both files too.
    expect(ctx.input.contents).toEqual([{ type: "text", text: "compare these" }, { type: "image", artifact_id: own.artifact_id }, { type: "file", artifact_id: replied.artifact_id, name: "q3.pdf" }]);
    const rows = await host.query<{ artifact_id: string; metadata_json: string }>("SELECT artifact_id, metadata_json FROM artifact WHERE artifact_id IN (?, ?)", [own.artifact_id, replied.artifact_id]);
    const metadata = Object.fromEntries(rows.map((r) => [r.artifact_id, JSON.parse(r.metadata_json)]));
    expect(metadata[replied.artifact_id].reply_to_message_id).toBe("41");
    expect(metadata[own.artifact_id].reply_to_message_id).toBeUndefined();
    // A reply with no words of its own to a voice note still runs on the note.
    const voice = { message_id: 42, date: 1_700_000_000, chat: { id: -101781, type: "supergroup" }, from: { id: 7, is_bot: false, first_name: "Bob" }, voice: { file_id: "bobs_voice", mime_type: "audio/ogg" } };
    await post(update("-101781", { text: "what did he say?", reply_to_message: voice }));
    await waitFor(() => sendsTo("-101781").length > 0, 15_000, "the answer");
    const [heard] = contextFor("what did he say?");
    expect(heard.input.attachments).toEqual([expect.objectContaining({ artifact_type: "audio", mime_type: "audio/ogg" })]);
    expect(heard.event.data.reply_to).toMatchObject({ message_id: 42, text: null, attachments: heard.input.attachments });
  });

  it("gives the runner a reply to a message of another chat (external_reply): its sender, the part quoted and its files, never a message of this chat that has its id", async () => {
    // Ada's own photo in her private chat with the bot, message 77 there.
    const chat = "101785";
    const inPrivate = (message: Record<string, unknown>) => ({ ...update(chat, message), message: { ...update(chat, message).message, chat: { id: Number(chat), type: "private" } } });
    const hers = inPrivate({ message_id: 77, caption: "my cat", photo: [{ file_id: "adas_cat", width: 800, height: 800 }] });
    await post(hers);
    await waitFor(() => contextFor("my cat").length > 0, 15_000, "the photo's run");
    // Then "Reply in another chat": Bob's sheet, message 77 of a supergroup, quoted into the private chat.
    const external_reply = {
      origin: { type: "user", date: 1_700_000_000, sender_user: { id: 7, is_bot: false, first_name: "Bob" } },
      chat: { id: -1001017850, type: "supergroup", title: "Team" },
      message_id: 77,
      document: { file_id: "bobs_sheet", file_name: "q4.csv", mime_type: "text/csv" },
    };
    await post(inPrivate({ text: "what is the total?", external_reply, quote: { text: "Q4 totals", position: 0 } }));
    const [ctx] = await waitFor(() => contextFor("what is the total?").length > 0 && contextFor("what is the total?"), 15_000, "the reply's run");
    expect(fake.callsTo(/\/getFile$/).map((c) => c.body.file_id)).toContain("bobs_sheet");
    expect(ctx.input.attachments).toEqual([expect.objectContaining({ artifact_type: "file", name: "q4.csv" })]);
    // `chat` says whose message 77 it is; no reply_to_message_id names one of this chat.
    expect(ctx.event.data.reply_to).toEqual({ message_id: 77, actor: { actor_type: "user", actor_id: "7", actor_name: "Bob" }, text: null, quote: "Q4 totals", attachments: ctx.input.attachments, unavailable: null, chat: { chat_id: "-1001017850", chat_title: "Team" } });
    expect(ctx.event.data.reply_to_message_id).toBeNull();
    // A location sent in a chat whose ids Telegram does not give: read as received, no id.
    const place = { origin: { type: "hidden_user", date: 1_700_000_000, sender_user_name: "Carol" }, location: { latitude: 48.8584, longitude: 2.2945 } };
    await post(inPrivate({ text: "how far is it?", external_reply: place }));
    const [far] = await waitFor(() => contextFor("how far is it?").length > 0 && contextFor("how far is it?"), 15_000, "the location reply's run");
    expect(far.event.data.reply_to).toEqual({ message_id: null, actor: null, text: "📍 Location: 48.8584, 2.2945", quote: null, attachments: [], unavailable: null, chat: null });
    // A file Telegram will not serve, of a message whose id it does not give: left out, and said so as the replied message's.
    const bulky = { origin: { type: "hidden_user", date: 1_700_000_000, sender_user_name: "Carol" }, document: { file_id: "carols_trip_too_big", file_name: "trip.mp4", mime_type: "video/mp4" } };
    const asked = inPrivate({ text: "what is in it?", external_reply: bulky });
    await post(asked);
    const [inIt] = await waitFor(() => contextFor("what is in it?").length > 0 && contextFor("what is in it?"), 15_000, "the reply to the big file's run");
    expect([inIt.input.attachments, inIt.event.data.reply_to]).toEqual([[], { message_id: null, actor: null, text: null, quote: null, attachments: [], unavailable: null, chat: null }]);
    const [row] = await host.query<{ metadata_json: string }>("SELECT metadata_json FROM event_log WHERE event_id = ?", [`telegram:${botId}:${asked.update_id}`]);
    expect(JSON.parse(row.metadata_json).attachments_unavailable).toBe("trip.mp4 of the replied message (Telegram getFile failed: Bad Request: file is too big)");
  });

  it("gives a reply to a message the bot received that message's files as stored then (no getFile, the same artifact); one expired, or edited, since is fetched again", async () => {
    const chat = "-101790";
    const plan = update(chat, { caption: "our plan", photo: [{ file_id: "plan_photo", width: 800, height: 800 }] });
    await post(plan);
    const [first] = await waitFor(() => contextFor("our plan").length > 0 && contextFor("our plan"), 15_000, "the photo's run");
    const [stored] = first.input.attachments;
    const fetches = () => fake.callsTo(/\/getFile$/).filter((c) => c.body.file_id === "plan_photo").length;
    expect(fetches()).toBe(1);

    await post(update(chat, { text: "is it doable?", reply_to_message: plan.message }));
    const [ctx] = await waitFor(() => contextFor("is it doable?").length > 0 && contextFor("is it doable?"), 15_000, "the reply's run");
    expect(fetches()).toBe(1);
    expect(ctx.input.attachments).toEqual([stored]);
    expect(ctx.input.contents).toEqual([{ type: "text", text: "is it doable?" }, { type: "image", artifact_id: stored.artifact_id }]);
    expect(ctx.event.data.reply_to).toMatchObject({ message_id: plan.message.message_id, text: "our plan", quote: null, attachments: [stored], unavailable: null });

    // Expired since (its TTL, or a recall): no longer the conversation's to give, so fetched again as for a message never received.
    await host.query("UPDATE artifact SET expires_at = ? WHERE artifact_id = ?", [Date.now() - 1_000, stored.artifact_id]);
    await post(update(chat, { text: "and now?", reply_to_message: plan.message }));
    const [later] = await waitFor(() => contextFor("and now?").length > 0 && contextFor("and now?"), 15_000, "the later reply's run");
    expect(fetches()).toBe(2);
    const [again] = later.input.attachments;
    expect(later.input.attachments).toEqual([expect.objectContaining({ artifact_type: "image", size_bytes: PHOTO.length })]);
    expect(again.artifact_id).not.toBe(stored.artifact_id);
    expect(later.event.data.reply_to.attachments).toEqual([again]);

    // A photo replaced by an edit since it was stored (Telegram's reply then gives the new one, and the edit's date):
    // fetched, never the old one as stored.
    const sketch = update(chat, { caption: "the sketch", photo: [{ file_id: "sketch_v1", width: 800, height: 800 }] });
    await post(sketch);
    const [drawn] = await waitFor(() => contextFor("the sketch").length > 0 && contextFor("the sketch"), 15_000, "the sketch's run");
    const edited = { ...sketch.message, photo: [{ file_id: "sketch_v2", width: 800, height: 800 }], edit_date: sketch.message.date + 60 };
    await post({ update_id: ++state.updateId, edited_message: edited });
    await post(update(chat, { text: "and this version?", reply_to_message: edited }));
    const [v2] = await waitFor(() => contextFor("and this version?").length > 0 && contextFor("and this version?"), 15_000, "the reply to the edited photo's run");
    expect(fake.callsTo(/\/getFile$/).map((c) => c.body.file_id)).toContain("sketch_v2");
    expect(v2.input.attachments).toEqual([expect.objectContaining({ artifact_type: "image", size_bytes: PHOTO.length })]);
    expect(v2.input.attachments[0].artifact_id).not.toBe(drawn.input.attachments[0].artifact_id);
    expect(v2.event.data.reply_to.attachments).toEqual(v2.input.attachments);
  });

  it("gives a reply to the bot's own answer the answer as the host recorded it: all its words when split over several messages, its photo as the same artifact (no getFile)", async () => {
    const chat = "-101795";
    const ourselves = { id: 123456, is_bot: true, first_name: "Test", username: OUR_USERNAME };
    const recorded = (messageId: number) =>
      waitFor(async () => (await host.query("SELECT seq FROM event_log WHERE event_type = 'delivery.succeeded' AND json_extract(data_json, '$.message_id') = ?", [String(messageId)])).length > 0, 15_000, `the trail of ${messageId}`);
    // Telegram gives the replied message as the chat shows it: here the second part of the answer only.
    await post(update(chat, { text: "long 5000" }));
    const parts = await waitFor(() => sendsTo(chat).length >= 2 && sendsTo(chat), 15_000, "the answer's two parts");
    const second = (parts[1].reply!.json as any).result.message_id as number;
    await recorded(second);
    await post(update(chat, { text: "make it shorter", reply_to_message: { message_id: second, from: ourselves, date: 1, chat: { id: Number(chat), type: "supergroup" }, text: parts[1].body.text } }));
    const [ctx] = await waitFor(() => contextFor("make it shorter").length > 0 && contextFor("make it shorter"), 15_000, "the reply's run");
    expect(ctx.event.data.reply_to).toEqual({ message_id: second, actor: { actor_type: "bot", actor_id: "123456", actor_name: "Test" }, text: longText(5000), quote: null, attachments: [], unavailable: null });
    // "Reply in another chat": the bot's message of that number in another supergroup, never this chat's answer.
    const elsewhere = { origin: { type: "user", date: 1_700_000_000, sender_user: ourselves }, chat: { id: -1001017960, type: "supergroup", title: "Other" }, message_id: second };
    await post(update(chat, { text: "and that one?", external_reply: elsewhere, quote: { text: "their words", position: 0 } }));
    const [other] = await waitFor(() => contextFor("and that one?").length > 0 && contextFor("and that one?"), 15_000, "the external reply's run");
    expect(other.event.data.reply_to).toEqual({ message_id: second, actor: { actor_type: "bot", actor_id: "123456", actor_name: "Test" }, text: null, quote: "their words", attachments: [], unavailable: null, chat: { chat_id: "-1001017960", chat_title: "Other" } });

    await post(update(chat, { text: "attach chart.png" }));
    const upload = await waitFor(() => fake.callsTo(/\/sendPhoto$/).find((c) => c.raw.includes(`name="chat_id"\r\n\r\n${chat}\r`) && c.reply), 15_000, "the photo");
    const photo = (upload.reply!.json as any).result.message_id as number;
    const runId = contextFor("attach chart.png")[0].run_id;
    const [made] = await host.query<{ artifact_id: string }>("SELECT artifact_id FROM artifact WHERE run_id = ?", [runId]);
    await recorded(photo);
    const fetches = () => fake.callsTo(/\/getFile$/).filter((c) => c.body.file_id === "our_chart").length;
    await post(update(chat, { text: "brighter", reply_to_message: { message_id: photo, from: ourselves, date: 1, chat: { id: Number(chat), type: "supergroup" }, photo: [{ file_id: "our_chart", width: 8, height: 8 }] } }));
    const [brighter] = await waitFor(() => contextFor("brighter").length > 0 && contextFor("brighter"), 15_000, "the second reply's run");
    expect(fetches()).toBe(0);
    expect(brighter.input.attachments).toEqual([expect.objectContaining({ artifact_id: made.artifact_id, artifact_type: "image", name: "chart.png" })]);
    expect(brighter.event.data.reply_to).toMatchObject({ message_id: photo, text: null, attachments: brighter.input.attachments, unavailable: null });
  });

  it("leaves out each of its own mentions among those a message starts with, whoever is named first; nothing after them, the text is as sent", async () => {
    const ada = { type: "text_mention", offset: 0, length: 3, user: { id: 77, is_bot: false, first_name: "Ada" } };
    const sent = [
      update("-101760", { text: "@OurTestBot @OurTestBot named twice", entities: [{ type: "mention", offset: 0, length: 11 }, { type: "mention", offset: 12, length: 11 }] }),
      // Another's mention first (a username, or a person without one), then the bot's, a link after them.
      update("-101761", { text: "@bob, @OurTestBot: see the docs", entities: [{ type: "mention", offset: 0, length: 4 }, { type: "mention", offset: 6, length: 11 }, { type: "text_link", offset: 27, length: 4, url: "https://example.com/docs" }] }),
      update("-101762", { text: "Ada @OurTestBot named second", entities: [ada, { type: "mention", offset: 4, length: 11 }] }),
      update("-101763", { text: "@bob @OurTestBot", entities: [{ type: "mention", offset: 0, length: 4 }, { type: "mention", offset: 5, length: 11 }] }),
    ];
    for (const u of sent) expect((await post(u)).status).toBe(200);
    const words = ["named twice", "@bob, see the docs (https://example.com/docs)", "Ada named second", "@bob @OurTestBot"];
    for (const [i, chat] of ["-101760", "-101761", "-101762", "-101763"].entries()) {
      const [answer] = await waitFor(() => sendsTo(chat).length > 0 && sendsTo(chat), 15_000, `the answer in ${chat}`);
      expect(answer.body.text).toBe(`echo: ${words[i]}`);
    }
  });

  it("answers a command addressed to another bot when its own username cannot be read (getMe failed), rather than drop it", async () => {
    const other = await addTelegramBot(host, { apiBaseUrl: fake.url, botToken: NO_GETME_TOKEN, secretToken: "tg-secret-token-nogetme-0123" }, { runner, agentId: "tg-agent-nogetme" });
    const u = update("-101800", { text: "/help@OtherBot", entities: [{ type: "bot_command", offset: 0, length: 14 }] });
    const res = await fetch(other.webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": "tg-secret-token-nogetme-0123" }, body: JSON.stringify(u) });
    expect(res.status).toBe(200);
    await waitFor(() => sendsTo("-101800").some((c) => c.body.text === "echo: /help@OtherBot"), 15_000, "the answer");
    // The failure is kept a while: during an outage the next commands do not each wait for getMe again.
    for (const next of ["/start@OtherBot", "/stop@OtherBot"]) {
      const again = update("-101800", { text: next, entities: [{ type: "bot_command", offset: 0, length: next.length }] });
      const answer = await fetch(other.webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": "tg-secret-token-nogetme-0123" }, body: JSON.stringify(again) });
      expect([answer.status, await answer.text()]).toEqual([200, '{"ok":true}']);
    }
    await waitFor(() => sendsTo("-101800").length >= 3, 15_000, "the next answers");
    expect(fake.callsTo(/\/getMe$/).filter((c) => c.path.includes(NO_GETME_TOKEN))).toHaveLength(1);
    // Said on the log, the platform's words on the one line.
    await expect.poll(() => host.logs()).toContain(`telegram bot ${other.botId}: getMe failed (Bad Gateway\\n${FORGED_LINE})`);
    expect(host.logs().split("\n").filter((l) => l.startsWith(FORGED_LINE))).toEqual([]);
  });
});

describe("Telegram: what this file sent and was answered", () => {
  it("keeps the bot's credentials out of every answer, record, stored payload and log line", () => platform.keepsSecretsOut());
});
