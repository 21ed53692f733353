import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../support/fake-platform";
import { putAgent } from "../support/scripted-runner";
import { startTelegramChat } from "../support/telegram-chat";

/**
 * A Telegram album: one update per item, sharing a `media_group_id`, the caption on one item. The user sent one
 * message, so one run gets every item's file and the caption, and the chat gets one answer. And, with the same
 * slow downloads, a single photo that reaches its conversation after a message sent later.
 */
let chat: Awaited<ReturnType<typeof startTelegramChat>>;
let updateId = 5_000;

beforeAll(async () => {
  chat = await startTelegramChat("album");
});
afterAll(async () => {
  await chat?.dispose();
});

/** One item of album `group` in `chatId`: message id `messageId`, a photo whose file id names it. */
function item(chatId: string, group: string, messageId: number, caption?: string, id = ++updateId) {
  const message = {
    message_id: messageId,
    date: Math.floor(Date.now() / 1000),
    chat: { id: Number(chatId), type: "supergroup", title: "Album group" },
    from: { id: 42, is_bot: false, first_name: "Ada" },
    media_group_id: group,
    photo: [{ file_id: `small-${messageId}`, width: 90, height: 90 }, { file_id: `photo-${messageId}`, width: 800, height: 800 }],
    ...(caption === undefined ? {} : { caption }),
  };
  return { update_id: id, message };
}

async function post(update: unknown): Promise<number> {
  const res = await fetch(chat.webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": chat.secretToken }, body: JSON.stringify(update) });
  await res.text();
  return res.status;
}

const contextsIn = (chatId: string) => chat.runner.contexts.filter((c) => c.conversation.conversation_id === chatId);
const answersIn = (chatId: string) => chat.fake.callsTo(/\/sendMessage$/).filter((c) => String(c.body.chat_id) === chatId);
const eventsIn = (chatId: string) =>
  chat.host.query<{ event_id: string; disposition: string; run_id: string | null; metadata_json: string }>(
    "SELECT event_id, disposition, run_id, metadata_json FROM event_log WHERE conversation_id = ? AND event_type = 'message.received' ORDER BY seq",
    [chatId],
  );
const bytesOf = async (ref: { artifact_id: string }) => new TextDecoder().decode((await chat.host.r2Object(`artifacts/${ref.artifact_id}`))!);

describe("a Telegram album", () => {
  it("is one run: every item's photo in the album's order, the caption, one answer; each item still its own event and transcript item", async () => {
    const chatId = "-880001";
    // Arriving out of order, the caption on the second item, each within the wait of the one before.
    const statuses = [];
    for (const [messageId, caption] of [[303], [302, "our trip"], [301]] as const) {
      statuses.push(await post(item(chatId, "album-a", messageId, caption)));
      await new Promise((r) => setTimeout(r, 300));
    }
    expect(statuses).toEqual([200, 200, 200]);
    await waitFor(() => answersIn(chatId).length > 0, 15_000, "the answer");
    const [ctx, ...more] = contextsIn(chatId);
    expect(more).toEqual([]);
    expect(ctx.input.text).toBe("our trip");
    expect(await Promise.all(ctx.input.attachments.map(bytesOf))).toEqual(["bytes of photos/photo-301.jpg", "bytes of photos/photo-302.jpg", "bytes of photos/photo-303.jpg"]);
    expect(ctx.input.contents.map((c: { type: string }) => c.type)).toEqual(["image", "text", "image", "image"]);

    const events = await eventsIn(chatId);
    const runId = ctx.run_id;
    // The first to arrive (303) has the run; the others joined it.
    expect(events.map((e) => [e.disposition, e.run_id])).toEqual([["bound", runId], ["merged", runId], ["merged", runId]]);
    expect(JSON.parse(events[1].metadata_json).album).toEqual({ media_group_id: "album-a", run_id: runId });
    expect(ctx.metadata.album).toEqual({ media_group_id: "album-a", event_ids: [events[2].event_id, events[1].event_id, events[0].event_id] });
    const items = await chat.host.query<{ event_id: string }>("SELECT event_id FROM transcript WHERE conversation_id = ? AND role = 'user' ORDER BY seq", [chatId]);
    expect(items.map((i) => i.event_id)).toEqual(events.map((e) => e.event_id));
    // The joined items' own runs were discarded: one run for the album.
    expect(await chat.host.query("SELECT run_id, status FROM run WHERE conversation_id = ?", [chatId])).toEqual([{ run_id: runId, status: "completed" }]);
    expect((await chat.host.admin("GET", `/v1/runs/${runId}`)).body.status).toBe("completed");
    await new Promise((r) => setTimeout(r, 300));
    expect(answersIn(chatId).map((c) => c.body.text)).toEqual(["echo: our trip"]);
    // It quotes the album's first item (301), not the first to arrive (303).
    expect(answersIn(chatId)[0].body.reply_parameters).toEqual({ message_id: 301, allow_sending_without_reply: true });
  });

  it("items sent at once make one run, and an item Telegram sends again joins nothing twice", async () => {
    const chatId = "-880002";
    const updates = [401, 402, 403, 404].map((messageId, i) => item(chatId, "album-b", messageId, i === 0 ? "four" : undefined));
    expect(await Promise.all(updates.map(post))).toEqual([200, 200, 200, 200]);
    expect(await post(updates[2])).toBe(200);
    await waitFor(() => answersIn(chatId).length > 0, 15_000, "the answer");
    const [ctx, ...more] = contextsIn(chatId);
    expect(more).toEqual([]);
    expect(await Promise.all(ctx.input.attachments.map(bytesOf))).toEqual([401, 402, 403, 404].map((n) => `bytes of photos/photo-${n}.jpg`));
    const events = await eventsIn(chatId);
    expect(events).toHaveLength(4);
    expect(events.filter((e) => e.disposition === "merged")).toHaveLength(3);
    expect(new Set(events.map((e) => e.run_id))).toEqual(new Set([ctx.run_id]));
  });

  it("an item whose merged decision could not be written, sent again after its album's run ended, runs in no second run", async () => {
    const chatId = "-880004";
    expect(await post(item(chatId, "album-e", 701, "two photos"))).toBe(200);
    // The item's decision (merged) is refused by the database: the webhook answers an error, and Telegram sends it again later.
    chat.host.databaseOutage({ queries: 1, matching: '"merged"' });
    const second = item(chatId, "album-e", 702);
    expect(await post(second)).toBe(500);
    await waitFor(() => answersIn(chatId).length > 0, 15_000, "the album's answer");
    const [ctx] = contextsIn(chatId);
    expect(await Promise.all(ctx.input.attachments.map(bytesOf))).toEqual(["bytes of photos/photo-701.jpg", "bytes of photos/photo-702.jpg"]);
    await chat.host.waitForRun(ctx.run_id);

    expect(await post(second)).toBe(200);
    await new Promise((r) => setTimeout(r, 2_500));
    // The runner had the item once, in the album's run; its event says so, and no run of its own is left.
    expect(contextsIn(chatId)).toHaveLength(1);
    expect(answersIn(chatId)).toHaveLength(1);
    expect((await eventsIn(chatId)).map((e) => [e.disposition, e.run_id])).toEqual([["bound", ctx.run_id], ["merged", ctx.run_id]]);
    expect(await chat.host.query("SELECT run_id FROM run WHERE conversation_id = ?", [chatId])).toEqual([{ run_id: ctx.run_id }]);
  });

  it("an item whose merged decision could not be written is not ended as never handed over while its album's run waits", async () => {
    const chatId = "-880005";
    // A reply streamed for seconds: the album's run waits its turn behind it.
    const busy = { update_id: ++updateId, message: { message_id: 800, date: Math.floor(Date.now() / 1000), chat: { id: Number(chatId), type: "supergroup", title: "Album group" }, from: { id: 42, is_bot: false, first_name: "Ada" }, text: `stream ${"word ".repeat(24)}` } };
    expect(await post(busy)).toBe(200);
    await waitFor(() => contextsIn(chatId).length === 1, 15_000, "the busy run");
    expect(await post(item(chatId, "album-f", 801, "two more"))).toBe(200);
    chat.host.databaseOutage({ queries: 1, matching: '"merged"' });
    expect(await post(item(chatId, "album-f", 802))).toBe(500);
    // The cron's sweep of runs ingress recorded long ago and never handed over to their conversation.
    await chat.host.triggerScheduled({ scheduledTime: new Date(Date.now() + 11 * 60_000) });
    await waitFor(() => answersIn(chatId).length === 2, 20_000, "the album's answer");
    const album = contextsIn(chatId)[1];
    await chat.host.waitForRun(album.run_id);
    expect(album.input.attachments).toHaveLength(2);
    expect((await eventsIn(chatId)).map((e) => e.disposition)).toEqual(["bound", "bound", "merged"]);
    // The item's own run is discarded, not left failed beside the run that had it.
    expect(await chat.host.query("SELECT status FROM run WHERE conversation_id = ?", [chatId])).toEqual([{ status: "completed" }, { status: "completed" }]);
  });

  it("an item whose download outlasts the wait still joins its album's run; one refused after its download holds it no longer", async () => {
    const chatId = "-880006";
    // Each item's webhook is announced to the conversation before its file is downloaded. 902's file takes longer than
    // ALBUM_WAIT_MS (1.5 s); 903's longer still, and its event is then refused by the database (Telegram would send it again).
    chat.slowFiles.set("photos/photo-902.jpg", 2_500);
    chat.slowFiles.set("photos/photo-903.jpg", 4_000);
    chat.host.databaseOutage({ queries: 1, matching: "photo-903.jpg" });
    const sentAt = Date.now();
    const updates = [item(chatId, "album-g", 901, "one message"), item(chatId, "album-g", 902), item(chatId, "album-g", 903)];
    expect(await Promise.all(updates.map(post))).toEqual([200, 200, 500]);
    await waitFor(() => answersIn(chatId).length > 0, 15_000, "the answer");
    const [ctx] = contextsIn(chatId);
    await chat.host.waitForRun(ctx.run_id);
    await new Promise((r) => setTimeout(r, 500));
    // One run, with the slow item's photo: the user gets one answer.
    expect(contextsIn(chatId)).toHaveLength(1);
    expect(ctx.input.text).toBe("one message");
    expect(await Promise.all(ctx.input.attachments.map(bytesOf))).toEqual(["bytes of photos/photo-901.jpg", "bytes of photos/photo-902.jpg"]);
    expect(answersIn(chatId).map((c) => c.body.text)).toEqual(["echo: one message"]);
    expect((await eventsIn(chatId)).map((e) => [e.disposition, e.run_id])).toEqual([["bound", ctx.run_id], ["merged", ctx.run_id]]);
    // The refused item released the run as its webhook failed: it did not wait out the announcement's bound (tens of seconds).
    expect(answersIn(chatId)[0].at - sentAt).toBeLessThan(4_000 + 5_000);
  });

  it("sent as a reply, has the replied message's file once: Telegram repeats the reply on every item, each then downloading it", async () => {
    const chatId = "-880010";
    const bobs = { message_id: 1300, date: 1_700_000_000, chat: { id: Number(chatId), type: "supergroup" }, from: { id: 7, is_bot: false, first_name: "Bob" }, document: { file_id: "bobs-report", file_name: "q3.pdf", mime_type: "application/pdf" } };
    const updates = [item(chatId, "album-r", 1301, "same as this?"), item(chatId, "album-r", 1302), item(chatId, "album-r", 1303)].map((u) => ({ ...u, message: { ...u.message, reply_to_message: bobs } }));
    for (const u of updates) expect(await post(u)).toBe(200);
    await waitFor(() => answersIn(chatId).length > 0, 15_000, "the answer");
    const [ctx, ...more] = contextsIn(chatId);
    expect(more).toEqual([]);
    const files = ["bytes of photos/photo-1301.jpg", "bytes of photos/photo-1302.jpg", "bytes of photos/photo-1303.jpg", "bytes of photos/bobs-report.jpg"];
    expect((await Promise.all(ctx.input.attachments.map(bytesOf))).sort()).toEqual(files.sort());
    // The one the runner has is the one its event's reply_to names, in contents as in attachments.
    const report = ctx.input.attachments.find((a: { name?: string }) => a.name === "q3.pdf");
    expect(ctx.event.data.reply_to.attachments).toEqual([report]);
    expect(ctx.input.contents.filter((c: { type: string }) => c.type === "file")).toEqual([{ type: "file", artifact_id: report.artifact_id, name: "q3.pdf" }]);
  });

  it("sent as a reply to a message the bot received, has that message's file once, as stored then: every item names the same artifact, none downloads it", async () => {
    const chatId = "-880011";
    const bobs = { message_id: 1400, date: Math.floor(Date.now() / 1000), chat: { id: Number(chatId), type: "supergroup", title: "Album group" }, from: { id: 7, is_bot: false, first_name: "Bob" }, document: { file_id: "bobs-plan", file_name: "plan.pdf", mime_type: "application/pdf" } };
    expect(await post({ update_id: ++updateId, message: bobs })).toBe(200);
    const [received] = await waitFor(() => contextsIn(chatId).length > 0 && contextsIn(chatId), 15_000, "the document's run");
    const [plan] = received.input.attachments;
    const updates = [item(chatId, "album-s", 1401, "same as this?"), item(chatId, "album-s", 1402), item(chatId, "album-s", 1403)].map((u) => ({ ...u, message: { ...u.message, reply_to_message: bobs } }));
    for (const u of updates) expect(await post(u)).toBe(200);
    const ctx = await waitFor(() => contextsIn(chatId).find((c) => c.input.text === "same as this?"), 15_000, "the album's run");
    expect(chat.fake.callsTo(/\/getFile$/).filter((c) => c.body.file_id === "bobs-plan")).toHaveLength(1);
    expect((await Promise.all(ctx.input.attachments.map(bytesOf))).sort()).toEqual(["bytes of photos/bobs-plan.jpg", "bytes of photos/photo-1401.jpg", "bytes of photos/photo-1402.jpg", "bytes of photos/photo-1403.jpg"]);
    expect(ctx.input.attachments.filter((a: { name?: string }) => a.name === "plan.pdf")).toEqual([plan]);
    expect(ctx.event.data.reply_to.attachments).toEqual([plan]);
    expect(ctx.input.contents.filter((c: { type: string }) => c.type === "file")).toEqual([{ type: "file", artifact_id: plan.artifact_id, name: "plan.pdf" }]);
  });

  it("an item arriving after its album's run began runs on its own; another album in the chat is another run", async () => {
    const chatId = "-880003";
    expect(await post(item(chatId, "album-c", 501, "first"))).toBe(200);
    await waitFor(() => contextsIn(chatId).length === 1, 15_000, "the album's run");
    expect(await post(item(chatId, "album-c", 502))).toBe(200);
    expect(await post(item(chatId, "album-d", 601, "second album"))).toBe(200);
    await waitFor(() => answersIn(chatId).length === 3, 15_000, "three answers");
    const contexts = contextsIn(chatId);
    expect(contexts.map((c) => c.input.attachments.length)).toEqual([1, 1, 1]);
    expect(contexts.map((c) => c.input.text)).toEqual(["first", null, "second album"]);
    expect((await eventsIn(chatId)).map((e) => e.disposition)).toEqual(["bound", "bound", "bound"]);
  });

  it("under interrupt, an item arriving after its album's run began waits for that run rather than cancelling it: the album is one message", async () => {
    const chatId = "-880007";
    await putAgent(chat.host, { agent_id: "album-interrupting", runner_id: chat.runner.runnerId(), scope: { type: "conversation", id: chatId }, concurrency: { strategy: "interrupt" } });
    // The caption has the album's run stream for about 3 s.
    expect(await post(item(chatId, "album-i", 1001, `stream ${"word ".repeat(12).trim()}`))).toBe(200);
    await waitFor(() => contextsIn(chatId).length === 1, 15_000, "the album's run");
    const album = contextsIn(chatId)[0];
    // A slow upload: the item reaches the conversation once its album's run has begun.
    expect(await post(item(chatId, "album-i", 1002))).toBe(200);
    await waitFor(() => contextsIn(chatId).length === 2, 15_000, "the late item's run");
    const late = contextsIn(chatId)[1];
    await chat.host.waitForRun(late.run_id);
    expect((await chat.host.admin("GET", `/v1/runs/${album.run_id}`)).body.status).toBe("completed");
    expect((await chat.host.admin("GET", `/v1/runs/${late.run_id}`)).body.status).toBe("completed");
    expect(late.input.attachments).toHaveLength(1);
  });

  it("under interrupt, an item too late for its album's run never cancels the run of a message sent after the album: that message made it moot", async () => {
    const chatId = "-880008";
    await putAgent(chat.host, { agent_id: "album-interrupted", runner_id: chat.runner.runnerId(), scope: { type: "conversation", id: chatId }, concurrency: { strategy: "interrupt" } });
    expect(await post(item(chatId, "album-j", 1101, `stream ${"word ".repeat(12).trim()}`))).toBe(200);
    await waitFor(() => contextsIn(chatId).length === 1, 15_000, "the album's run");
    // The user's next message, sent after the album: it interrupts the album's run, and its own run streams a while.
    const text = { message_id: 1103, date: Math.floor(Date.now() / 1000), chat: { id: Number(chatId), type: "supergroup", title: "Album group" }, from: { id: 42, is_bot: false, first_name: "Ada" }, text: `stream ${"word ".repeat(16).trim()}` };
    expect(await post({ update_id: ++updateId, message: text })).toBe(200);
    await waitFor(() => contextsIn(chatId).length === 2, 15_000, "the newer message's run");
    const newer = contextsIn(chatId)[1];
    // The album's second item, its upload slow: it reaches the conversation only now, though sent before that message.
    expect(await post(item(chatId, "album-j", 1102))).toBe(200);
    await chat.host.waitForRun(newer.run_id);
    const status = async (runId: string) => (await chat.host.admin("GET", `/v1/runs/${runId}`)).body.status;
    // The album's run gave way to the newer message, which is answered whole; the late item, older than it, runs nothing.
    expect([await status(contextsIn(chatId)[0].run_id), await status(newer.run_id)]).toEqual(["cancelled", "completed"]);
    expect(contextsIn(chatId)).toHaveLength(2);
    expect(await rejectedIn(chatId)).toEqual([{ reason: "newer_message", strategy: "interrupt", newer_run_id: newer.run_id }]);
  });
});

/** Why each event of the chat rejected was (its `metadata.rejection`). */
async function rejectedIn(chatId: string) {
  const rows = await chat.host.query<{ metadata_json: string }>("SELECT metadata_json FROM event_log WHERE conversation_id = ? AND disposition = 'rejected' ORDER BY seq", [chatId]);
  return rows.map((r) => JSON.parse(r.metadata_json).rejection);
}

describe("under interrupt, a message slow to reach its conversation", () => {
  it("a photo slow to download never cancels the run of a message sent after it: the newer question is answered, the photo runs nothing", async () => {
    const chatId = "-880009";
    await putAgent(chat.host, { agent_id: "slow-photo", runner_id: chat.runner.runnerId(), scope: { type: "conversation", id: chatId }, concurrency: { strategy: "interrupt" } });
    const from = { date: Math.floor(Date.now() / 1000), chat: { id: Number(chatId), type: "supergroup", title: "Album group" }, from: { id: 42, is_bot: false, first_name: "Ada" } };
    // A single photo (no album) whose file takes 2 s to download: handed over to the conversation only then.
    chat.slowFiles.set("photos/photo-1201.jpg", 2_000);
    const photo = post({ update_id: ++updateId, message: { ...from, message_id: 1201, photo: [{ file_id: "photo-1201", width: 800, height: 800 }], caption: "what is this?" } });
    await new Promise((r) => setTimeout(r, 100));
    // The user's next message, sent after the photo, reaches the conversation first; its run streams for about 6 s.
    const question = `stream ${"word ".repeat(24).trim()}`;
    expect(await post({ update_id: ++updateId, message: { ...from, message_id: 1202, text: question } })).toBe(200);
    await waitFor(() => contextsIn(chatId).length === 1, 15_000, "the newer message's run");
    expect(await photo).toBe(200);
    const [newer] = contextsIn(chatId);
    expect(newer.input.text).toBe(question);
    await chat.host.waitForRun(newer.run_id);
    expect((await chat.host.admin("GET", `/v1/runs/${newer.run_id}`)).body.status).toBe("completed");
    // The photo, older than the question, is recorded and rejected, saying which run made it moot: one answer in the chat.
    expect(await rejectedIn(chatId)).toEqual([{ reason: "newer_message", strategy: "interrupt", newer_run_id: newer.run_id }]);
    expect(contextsIn(chatId)).toHaveLength(1);
    await waitFor(() => answersIn(chatId).length === 1, 10_000, "the answer");
    expect(answersIn(chatId).map((c) => c.body.reply_parameters?.message_id)).toEqual([1202]);
  });
});
