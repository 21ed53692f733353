import { beforeAll, describe, expect, it } from "vitest";
import { startFakePlatform, waitFor } from "../support/fake-platform";
import { useSlackPlatform, type SlackPlatform } from "../support/slack-platform";

/** What Slack sends as it sends it: payloads of people, bots and apps, and the parent a reply in a thread carries. */
const platform = useSlackPlatform();
const { state, BOT_TOKEN, FILE, BOT_USER, threadParents, unscopedChannels, slowParents, failingParents, post, callback, message, postsTo, contextFor } = platform;
let host: SlackPlatform["host"];
let fake: SlackPlatform["fake"];
let runner: SlackPlatform["runner"];
let botId: string;
beforeAll(() => void ({ host, fake, runner, botId } = platform));

describe("Slack: payloads as Slack sends them", () => {
  const recorded = (ev: { event_id: string }, channel: string, ts: string) =>
    host.query<{ event_type: string; conversation_id: string | null }>("SELECT event_type, conversation_id FROM event_log WHERE event_id IN (?, ?)", [`slack:${botId}:${ev.event_id}`, `slack:${botId}:msg:${channel}:${ts}`]);

  it("runs a person's upload whose payload names bot_id as null: a null field is an absent one", async () => {
    // Slack has sent user file uploads as `"bot_id": null` (botkit#1372 shows such a payload): a person, not a bot.
    const files = [{ id: "F1", name: "report.pdf", mimetype: "application/pdf", url_private_download: `${fake.url}/files/F1/report.pdf` }];
    const msg = message("C-NULLBOT", "please read this", { subtype: "file_share", upload: true, display_as_bot: false, bot_id: null, thread_ts: null, files });
    const ev = callback(msg);
    expect((await post(ev)).status).toBe(200);
    expect(await recorded(ev, "C-NULLBOT", msg.ts)).toEqual([{ event_type: "message.received", conversation_id: "C-NULLBOT" }]);
    const [ctx] = await waitFor(() => contextFor("please read this").length > 0 && contextFor("please read this"));
    expect(ctx.input.attachments).toHaveLength(1);
  });

  it("gives the runner words, not Slack's markup: its own leading mention left out, the others, channels, links and entities readable; raw_text keeps the markup", async () => {
    const raw = "<@UBOT>: ask <@U123> and <@UBOT> in <#C9|general> or <#C10>, <!here> &amp; <!subteam^S1|@devs>: see <https://example.com/docs|the docs>, <http://example.com|example.com>, <mailto:a@b.co|a@b.co> &lt;3";
    const msg = message("C-WORDS", raw, { type: "app_mention" });
    expect((await post(callback(msg))).status).toBe(200);
    const words = "ask @U123 and @UBOT in #general or #C10, @here & @devs: see the docs (https://example.com/docs), example.com, a@b.co <3";
    const [ctx] = await waitFor(() => contextFor(words).length > 0 && contextFor(words), 15_000, "the run");
    expect(ctx.event.data).toMatchObject({ ts: msg.ts, raw_text: raw });
    // A bare ping keeps the mention: the bot was called. A message naming the bot later is read with it in place.
    await post(callback(message("C-WORDS", "<@UBOT>", { type: "app_mention" })));
    await post(callback(message("C-WORDS", "thanks <@UBOT>")));
    await waitFor(() => contextFor("@UBOT").length > 0 && contextFor("thanks @UBOT").length > 0, 15_000, "the pings' runs");
    // Every one of the bot's own mentions among those the message starts with is left out, whoever is named first;
    // the others stay. Nothing after the mentions: as sent.
    for (const raw of ["<@UBOT> <@UBOT> named twice", "<@U123>, <@UBOT>: named second", "<!here> <@UBOT> <@U123> named among others", "<@U123> <@UBOT>"]) await post(callback(message("C-WORDS-LEAD", raw)));
    for (const words of ["named twice", "@U123, named second", "@here @U123 named among others", "@U123 @UBOT"]) await waitFor(() => contextFor(words).length > 0, 15_000, `the run of "${words}"`);
    // An edit of a message still waiting takes its words read the same way.
    const held = message("C-WORDS-EDIT", "sleep 3000");
    await post(callback(held));
    await waitFor(() => contextFor("sleep 3000").some((c) => c.conversation.conversation_id === "C-WORDS-EDIT"), 15_000, "the first run");
    const typo = message("C-WORDS-EDIT", "<@UBOT> tpyo");
    await post(callback(typo));
    const edit = { type: "message", subtype: "message_changed", channel: "C-WORDS-EDIT", hidden: true, ts: "1800009000.000001", message: { type: "message", user: "U42", text: "<@UBOT> typo, <#C9|general>", ts: typo.ts, edited: { user: "U42", ts: "1800009000.000001" } } };
    await post(callback(edit));
    await waitFor(() => contextFor("typo, #general").length > 0, 15_000, "the edited message's run");
  });

  it("neither records nor answers the bot's own posts, uploads and streamed chat.update edits that Slack sends back; another bot's post is recorded", async () => {
    const mine = { user: BOT_USER, bot_id: "B0BOT", app_id: "A1", bot_profile: { id: "B0BOT", app_id: "A1", name: "ours" } };
    const post1 = message("C-ECHO", "echo: hi", mine);
    const echoes = [
      post1,
      // The streamed answer's chat.update, as Slack reports it (the bot's own edit).
      { type: "message", subtype: "message_changed", channel: "C-ECHO", hidden: true, ts: `${++state.messageTs}.000300`, message: { type: "message", text: "echo: hi there", ts: post1.ts, edited: { user: "B0BOT", ts: `${state.messageTs}.000300` }, ...mine }, previous_message: { ...post1 } },
      // A file the answer shared: the bot user's upload, without bot_id.
      message("C-ECHO", "", { subtype: "file_share", user: BOT_USER, files: [{ id: "F9", name: "chart.png", mimetype: "image/png", url_private_download: `${fake.url}/files/F9/chart.png` }] }),
      // An app_id-only echo (no user): the app's bot all the same.
      message("C-ECHO", "echo: again", { user: undefined, bot_id: "B0BOT", subtype: "bot_message", app_id: "A1" }),
    ];
    for (const ev of echoes) expect((await post(callback(ev))).status).toBe(200);
    const other = callback(message("C-ECHO", "another app's bot", { user: "UOTHER", bot_id: "B2", app_id: "A2" }));
    expect((await post(other)).status).toBe(200);
    expect(await host.query("SELECT event_type, source_event_type FROM event_log WHERE conversation_id = 'C-ECHO' ORDER BY seq")).toEqual([{ event_type: "platform.unhandled", source_event_type: "message" }]);
    expect(runner.contexts.filter((c) => c.conversation.conversation_id === "C-ECHO")).toEqual([]);
  });

  it("runs a person's post made through our app with their own user token: Slack marks it with the app's bot_id, but the words are theirs", async () => {
    // What Slack sends for chat.postMessage with a user token the person granted our app.
    const viaApp = { user: "U42", bot_id: "B0BOT", app_id: "A1", bot_profile: { id: "B0BOT", app_id: "A1", name: "ours" } };
    const msg = message("C-VIA-APP", "<@UBOT> what about the person?", viaApp);
    const ev = callback(msg);
    expect((await post(ev)).status).toBe(200);
    expect(await recorded(ev, "C-VIA-APP", msg.ts)).toEqual([{ event_type: "message.received", conversation_id: "C-VIA-APP" }]);
    const ctx = await waitFor(() => contextFor("what about the person?").find((c) => c.conversation.conversation_id === "C-VIA-APP"), 15_000, "the person's run");
    expect(ctx.actor).toMatchObject({ actor_id: "U42" });
    // Its edit, while it still waits, is the person's edit; its deletion their recall.
    const held = message("C-VIA-APP-EDIT", "sleep 3000");
    await post(callback(held));
    await waitFor(() => contextFor("sleep 3000").some((c) => c.conversation.conversation_id === "C-VIA-APP-EDIT"), 15_000, "the first run");
    const typo = message("C-VIA-APP-EDIT", "tpyo via app", viaApp);
    await post(callback(typo));
    const edit = { type: "message", subtype: "message_changed", channel: "C-VIA-APP-EDIT", hidden: true, ts: `${++state.messageTs}.000300`, message: { type: "message", text: "typo via app", ts: typo.ts, edited: { user: "U42", ts: `${state.messageTs}.000300` }, ...viaApp } };
    await post(callback(edit));
    await waitFor(() => contextFor("typo via app").length > 0, 15_000, "the edited message's run");
    const gone = callback({ type: "message", subtype: "message_deleted", channel: "C-VIA-APP", deleted_ts: msg.ts, ts: `${++state.messageTs}.000400`, previous_message: { ...viaApp, ts: msg.ts, text: msg.text } });
    expect((await post(gone)).status).toBe(200);
    expect(await host.query("SELECT event_type, actor_id FROM event_log WHERE event_id = ?", [`slack:${botId}:${gone.event_id}`])).toEqual([{ event_type: "message.recalled", actor_id: "U42" }]);
  });

  it("runs a /me message (subtype me_message): a person's own words", async () => {
    const msg = message("C-ME", "is stuck on the deploy", { subtype: "me_message" });
    const ev = callback(msg);
    expect((await post(ev)).status).toBe(200);
    expect(await recorded(ev, "C-ME", msg.ts)).toEqual([{ event_type: "message.received", conversation_id: "C-ME" }]);
  });
});

describe("Slack: a reply in a thread carries the thread's parent (event.data.reply_to)", () => {
  const report = () => ({ id: "F1", name: "report.pdf", mimetype: "application/pdf", url_private_download: `${fake.url}/files/F1/report.pdf` });
  const repliesCalls = (ts: string) => fake.callsTo(/^\/conversations\.replies$/).filter((c) => new URLSearchParams(c.raw).get("ts") === ts);
  const runOf = (text: string, channel: string) => waitFor(() => contextFor(text).find((c) => c.conversation.conversation_id === channel), 15_000, `the run of "${text}"`);

  it("reads a parent the bot never received from Slack (its thread's first message), its file downloaded as the replied message's", async () => {
    const parentTs = "1799990000.000100";
    threadParents.set(parentTs, { type: "message", user: "U77", text: "<@U88> the Q3 numbers, see &lt;draft&gt;", ts: parentTs, thread_ts: parentTs, reply_count: 3, files: [report()] });
    // An app subscribed to app_mention only: the thread's earlier messages never reached it.
    expect((await post(callback({ ...message("C-THREAD", "<@UBOT> what do you think?", { thread_ts: parentTs, parent_user_id: "U77" }), type: "app_mention", channel_type: undefined }))).status).toBe(200);
    const ctx = await runOf("what do you think?", "C-THREAD");
    const [read] = repliesCalls(parentTs);
    expect(Object.fromEntries(new URLSearchParams(read.raw))).toEqual({ channel: "C-THREAD", ts: parentTs, limit: "1", inclusive: "true" });
    expect(read.headers.authorization).toBe(`Bearer ${BOT_TOKEN}`);
    expect(ctx.input.attachments).toEqual([expect.objectContaining({ name: "report.pdf", mime_type: "application/pdf", size_bytes: FILE.length })]);
    expect(ctx.event.data.reply_to).toEqual({
      message_id: parentTs,
      actor: { actor_type: "user", actor_id: "U77", actor_name: null },
      text: "@U88 the Q3 numbers, see <draft>",
      quote: null,
      attachments: ctx.input.attachments,
      unavailable: null,
    });
    expect(ctx.conversation).toMatchObject({ conversation_id: "C-THREAD", thread_id: parentTs });
  });

  it("takes a parent the host recorded as recorded, without asking Slack; one recorded with files is read for them (they are the channel's)", async () => {
    const parent = message("C-THREAD-REC", "<@UBOT> shall we ship on friday?");
    await post(callback(parent));
    expect((await runOf("shall we ship on friday?", "C-THREAD-REC")).event.data.reply_to).toBeNull();
    await post(callback(message("C-THREAD-REC", "<@UBOT> or monday?", { thread_ts: parent.ts, parent_user_id: "U42" })));
    expect((await runOf("or monday?", "C-THREAD-REC")).event.data.reply_to).toEqual({ message_id: parent.ts, actor: { actor_type: "user", actor_id: "U42", actor_name: null }, text: "@UBOT shall we ship on friday?", quote: null, attachments: [], unavailable: null });
    expect(repliesCalls(parent.ts)).toEqual([]);

    const withFile = message("C-THREAD-REC", "<@UBOT> read this", { subtype: "file_share", files: [report()] });
    await post(callback(withFile));
    await runOf("read this", "C-THREAD-REC");
    threadParents.set(withFile.ts, { ...withFile, thread_ts: withFile.ts });
    await post(callback(message("C-THREAD-REC", "<@UBOT> and the totals?", { thread_ts: withFile.ts, parent_user_id: "U42" })));
    const ctx = await runOf("and the totals?", "C-THREAD-REC");
    expect(repliesCalls(withFile.ts)).toHaveLength(1);
    expect(ctx.event.data.reply_to).toMatchObject({ message_id: withFile.ts, text: "@UBOT read this", attachments: [expect.objectContaining({ name: "report.pdf" })], unavailable: null });
    expect(ctx.input.attachments).toEqual(ctx.event.data.reply_to.attachments);
  });

  it("takes a parent the bot delivered (its answer in the channel) from the host's record, without asking Slack: the answer's words as the runner sent them", async () => {
    const asked = message("C-THREAD-OWN", "<@UBOT> summarise *this*");
    await post(callback(asked));
    await runOf("summarise *this*", "C-THREAD-OWN");
    const [answer] = await waitFor(() => postsTo("C-THREAD-OWN").length > 0 && postsTo("C-THREAD-OWN"));
    expect(answer.body.thread_ts).toBeUndefined();
    const answerTs = (answer.reply!.json as { ts: string }).ts;
    await waitFor(async () => (await host.query("SELECT 1 FROM event_log WHERE event_type = 'delivery.succeeded' AND json_extract(data_json, '$.message_id') = ?", [answerTs])).length > 0, 15_000, "the answer recorded");
    // Slack would give its rendered mrkdwn, read once a minute at most: never asked.
    threadParents.set(answerTs, { type: "message", bot_id: "B1", text: "echo: summarise _this_ (as Slack renders it)", ts: answerTs, thread_ts: answerTs });
    await post(callback(message("C-THREAD-OWN", "make it shorter", { thread_ts: answerTs, parent_user_id: BOT_USER })));
    const ctx = await runOf("make it shorter", "C-THREAD-OWN");
    expect(repliesCalls(answerTs)).toEqual([]);
    // Its sender the bot user, as the envelope's authorizations name it and as a read from Slack would.
    expect(ctx.event.data.reply_to).toEqual({ message_id: answerTs, actor: { actor_type: "bot", actor_id: BOT_USER, actor_name: null }, text: "echo: summarise *this*", quote: null, attachments: [], unavailable: null });
    expect(ctx.conversation).toMatchObject({ conversation_id: "C-THREAD-OWN", thread_id: answerTs });

    // An answer with a file: its artifact is the channel conversation's, which a run in the thread may not read, so it is read from Slack.
    await post(callback(message("C-THREAD-OWN-FILE", "<@UBOT> attach chart.png")));
    const [withFile] = await waitFor(() => postsTo("C-THREAD-OWN-FILE").length > 0 && fake.callsTo(/^\/files\.completeUploadExternal$/).some((c) => c.raw.includes("C-THREAD-OWN-FILE")) && postsTo("C-THREAD-OWN-FILE"), 15_000, "the answer and its file");
    const fileTs = (withFile.reply!.json as { ts: string }).ts;
    await waitFor(async () => (await host.query("SELECT 1 FROM event_log WHERE event_type = 'delivery.succeeded' AND json_extract(data_json, '$.message_id') = ?", [fileTs])).length > 0, 15_000, "the answer recorded");
    threadParents.set(fileTs, { type: "message", bot_id: "B1", text: "here is chart.png", ts: fileTs, thread_ts: fileTs });
    await post(callback(message("C-THREAD-OWN-FILE", "which chart?", { thread_ts: fileTs, parent_user_id: BOT_USER })));
    const read = await runOf("which chart?", "C-THREAD-OWN-FILE");
    expect(repliesCalls(fileTs)).toHaveLength(1);
    expect(read.event.data.reply_to).toMatchObject({ message_id: fileTs, actor: { actor_type: "bot", actor_id: "B1" }, text: "here is chart.png", unavailable: null });
  });

  it("takes a parent the bot delivered and deleted since (a tombstone, its thread having replies) as deleted, not from the host's record", async () => {
    await post(callback(message("C-THREAD-OWN-GONE", "<@UBOT> summarise the plan")));
    await runOf("summarise the plan", "C-THREAD-OWN-GONE");
    const [answer] = await waitFor(() => postsTo("C-THREAD-OWN-GONE").length > 0 && postsTo("C-THREAD-OWN-GONE"));
    const answerTs = (answer.reply!.json as { ts: string }).ts;
    await waitFor(async () => (await host.query("SELECT 1 FROM event_log WHERE event_type = 'delivery.succeeded' AND json_extract(data_json, '$.message_id') = ?", [answerTs])).length > 0, 15_000, "the answer recorded");
    await post(callback(message("C-THREAD-OWN-GONE", "shorter?", { thread_ts: answerTs, parent_user_id: BOT_USER })));
    expect((await runOf("shorter?", "C-THREAD-OWN-GONE")).event.data.reply_to).toMatchObject({ message_id: answerTs, text: "echo: summarise the plan", unavailable: null });
    // Deleted while its thread has replies: Slack leaves a tombstone, told by a message_changed.
    const tombstone = { type: "message", subtype: "tombstone", user: "USLACKBOT", hidden: true, text: "This message was deleted.", ts: answerTs, thread_ts: answerTs, reply_count: 1 };
    threadParents.set(answerTs, tombstone);
    expect((await post(callback({ type: "message", subtype: "message_changed", hidden: true, channel: "C-THREAD-OWN-GONE", ts: `${++state.messageTs}.000300`, message: tombstone }))).status).toBe(200);
    await post(callback(message("C-THREAD-OWN-GONE", "and now?", { thread_ts: answerTs, parent_user_id: BOT_USER })));
    expect((await runOf("and now?", "C-THREAD-OWN-GONE")).event.data.reply_to).toMatchObject({ message_id: answerTs, text: null, attachments: [], unavailable: "it was deleted" });
  });

  it("takes a recorded parent edited since with its newest words, as history keeps them, not its first ones", async () => {
    const parent = message("C-THREAD-EDIT", "<@UBOT> ship on friday?");
    await post(callback(parent));
    await runOf("ship on friday?", "C-THREAD-EDIT");
    const editTs = `${++state.messageTs}.000300`;
    await post(callback({ type: "message", subtype: "message_changed", channel: "C-THREAD-EDIT", hidden: true, ts: editTs, message: { type: "message", user: "U42", text: "<@UBOT> ship on monday? cc <@U77>", ts: parent.ts, edited: { user: "U42", ts: editTs } } }));
    await waitFor(async () => (await host.query("SELECT 1 FROM transcript WHERE content = 'ship on monday? cc @U77'")).length > 0, 15_000, "the edit recorded");
    await post(callback(message("C-THREAD-EDIT", "<@UBOT> which day again?", { thread_ts: parent.ts, parent_user_id: "U42" })));
    const ctx = await runOf("which day again?", "C-THREAD-EDIT");
    expect(ctx.event.data.reply_to).toEqual({ message_id: parent.ts, actor: { actor_type: "user", actor_id: "U42", actor_name: null }, text: "ship on monday? cc @U77", quote: null, attachments: [], unavailable: null });
    expect(repliesCalls(parent.ts)).toEqual([]);
  });

  it("reads a parent once for a burst of replies in its thread: a later reply takes it as the earlier one read it (Slack allows an app outside its Marketplace one read a minute)", async () => {
    const parentTs = "1799990002.000100";
    threadParents.set(parentTs, { type: "message", user: "U77", text: "release notes are up", ts: parentTs, thread_ts: parentTs });
    const expected = { message_id: parentTs, actor: { actor_type: "user", actor_id: "U77", actor_name: null }, text: "release notes are up", quote: null, attachments: [], unavailable: null };
    for (const text of ["typos?", "anything missing?"]) {
      expect((await post(callback({ ...message("C-THREAD-BURST", `<@UBOT> ${text}`, { thread_ts: parentTs, parent_user_id: "U77" }), type: "app_mention", channel_type: undefined }))).status).toBe(200);
      expect((await runOf(text, "C-THREAD-BURST")).event.data.reply_to).toEqual(expected);
    }
    expect(repliesCalls(parentTs)).toHaveLength(1);
  });

  it("reads a parent again, not as an earlier reply read it, once it is deleted (a tombstone, or message_deleted) or edited since", async () => {
    const tombstone = (ts: string) => ({ type: "message", subtype: "tombstone", user: "USLACKBOT", hidden: true, text: "This message was deleted.", ts, thread_ts: ts, reply_count: 1 });
    const revisions: [string, (ts: string) => Record<string, unknown>, Record<string, unknown>][] = [
      // A parent with replies deleted stays as a tombstone, told by a message_changed.
      ["tombstone", (ts) => ({ type: "message", subtype: "message_changed", hidden: true, channel: "C-THREAD-GONE", ts: `${++state.messageTs}.000300`, message: tombstone(ts) }), { text: null, unavailable: "it was deleted" }],
      ["deleted", (ts) => ({ type: "message", subtype: "message_deleted", hidden: true, channel: "C-THREAD-GONE", ts: `${++state.messageTs}.000300`, deleted_ts: ts, previous_message: { type: "message", user: "U77", ts, thread_ts: ts, text: "the plan" } }), { text: null, unavailable: "it was deleted" }],
      ["edited", (ts) => ({ type: "message", subtype: "message_changed", hidden: true, channel: "C-THREAD-GONE", ts: `${++state.messageTs}.000300`, message: { type: "message", user: "U77", text: "the new plan", ts, thread_ts: ts, edited: { user: "U77", ts: `${state.messageTs}.000300` } } }), { text: "the new plan", unavailable: null }],
      // A parent naming the bot, edited: Slack sends its app_mention again, marked edited, with its own ts as its thread_ts.
      ["mention edited", (ts) => ({ type: "app_mention", channel: "C-THREAD-GONE", user: "U77", text: "<@UBOT> the new plan", ts, thread_ts: ts, edited: { user: "U77", ts: `${++state.messageTs}.000300` } }), { text: "@UBOT the new plan", unavailable: null }],
    ];
    for (const [label, revision, after] of revisions) {
      const parentTs = `${++state.messageTs}.000100`;
      threadParents.set(parentTs, { type: "message", user: "U77", text: "the plan", ts: parentTs, thread_ts: parentTs });
      const reply = (text: string) => callback({ ...message("C-THREAD-GONE", `<@UBOT> ${text}`, { thread_ts: parentTs, parent_user_id: "U77" }), type: "app_mention", channel_type: undefined });
      await post(reply(`${label}: first?`));
      expect((await runOf(`${label}: first?`, "C-THREAD-GONE")).event.data.reply_to).toMatchObject({ message_id: parentTs, text: "the plan", unavailable: null });
      const edited = { edited: "the new plan", "mention edited": "<@UBOT> the new plan" }[label];
      threadParents.set(parentTs, edited ? { type: "message", user: "U77", text: edited, ts: parentTs, thread_ts: parentTs } : tombstone(parentTs));
      expect((await post(callback(revision(parentTs)))).status).toBe(200);
      await post(reply(`${label}: second?`));
      expect((await runOf(`${label}: second?`, "C-THREAD-GONE")).event.data.reply_to, label).toMatchObject({ message_id: parentTs, ...after });
      expect(repliesCalls(parentTs), label).toHaveLength(2);
    }
  });

  it("reads a parent once for a reply Slack sends both as message and as app_mention, at once: the second copy, the duplicate, takes the first's read", async () => {
    const parentTs = "1799990004.000100";
    threadParents.set(parentTs, { type: "message", user: "U77", text: "the draft is in", ts: parentTs, thread_ts: parentTs });
    // Answered slowly: both copies are past their duplicate check while the first read is under way.
    slowParents.set(parentTs, 300);
    const reply = message("C-THREAD-PAIR", "<@UBOT> is it final?", { thread_ts: parentTs, parent_user_id: "U77" });
    const answers = await Promise.all([post(callback(reply)), post(callback({ ...reply, type: "app_mention", channel_type: undefined }))]);
    expect(answers.map((a) => a.status)).toEqual([200, 200]);
    const ctx = await runOf("is it final?", "C-THREAD-PAIR");
    expect(ctx.event.data.reply_to).toEqual({ message_id: parentTs, actor: { actor_type: "user", actor_id: "U77", actor_name: null }, text: "the draft is in", quote: null, attachments: [], unavailable: null });
    expect(repliesCalls(parentTs)).toHaveLength(1);
    expect(await host.query("SELECT source_event_type FROM event_log WHERE event_id = ?", [`slack:${botId}:msg:C-THREAD-PAIR:${reply.ts}`])).toHaveLength(1);
  });

  it("takes the parent a thread_broadcast carries (`root`) without asking Slack, its file downloaded as the replied message's", async () => {
    // Slack would refuse the read here: the parent can only have come with the broadcast.
    unscopedChannels.add("C-THREAD-BROADCAST");
    const parentTs = "1799990005.000100";
    const root = { type: "message", user: "U77", text: "<@U88> budget for Q4", ts: parentTs, thread_ts: parentTs, reply_count: 1, files: [report()] };
    const ev = callback(message("C-THREAD-BROADCAST", "<@UBOT> sent to the channel too: approve?", { subtype: "thread_broadcast", thread_ts: parentTs, root }));
    expect((await post(ev)).status).toBe(200);
    const ctx = await runOf("sent to the channel too: approve?", "C-THREAD-BROADCAST");
    expect(repliesCalls(parentTs)).toEqual([]);
    expect(ctx.input.attachments).toEqual([expect.objectContaining({ name: "report.pdf", mime_type: "application/pdf", size_bytes: FILE.length })]);
    expect(ctx.event.data.reply_to).toEqual({ message_id: parentTs, actor: { actor_type: "user", actor_id: "U77", actor_name: null }, text: "@U88 budget for Q4", quote: null, attachments: ctx.input.attachments, unavailable: null });
    const [row] = await host.query<{ metadata_json: string }>("SELECT metadata_json FROM event_log WHERE event_id = ?", [`slack:${botId}:msg:C-THREAD-BROADCAST:${ev.event.ts}`]);
    expect(JSON.parse(row.metadata_json).attachments_unavailable).toBeUndefined();
  });

  it("fetches a reply's own file while its parent is read, not after: a slow read leaves the file its whole time", async () => {
    // A file that takes 1.3 s: more than what the 2 s leave after a read that runs out its 1 s.
    const slowFile = await startFakePlatform(async () => {
      await new Promise((r) => setTimeout(r, 1_300));
      return { bytes: FILE, headers: { "content-type": "application/pdf" } };
    });
    try {
      const parentTs = "1799990006.000100";
      threadParents.set(parentTs, { type: "message", user: "U77", text: "which version?", ts: parentTs, thread_ts: parentTs });
      slowParents.set(parentTs, 2_500);
      const file = { id: "F8", name: "v2.pdf", mimetype: "application/pdf", url_private_download: `${slowFile.url}/files/F8/v2.pdf` };
      const ev = callback(message("C-THREAD-OWNFILE", "<@UBOT> this one", { subtype: "file_share", thread_ts: parentTs, parent_user_id: "U77", files: [file] }));
      const started = Date.now();
      expect((await post(ev)).status).toBe(200);
      expect(Date.now() - started).toBeLessThan(3_000);
      const ctx = await runOf("this one", "C-THREAD-OWNFILE");
      expect(ctx.input.attachments).toEqual([expect.objectContaining({ name: "v2.pdf", mime_type: "application/pdf", size_bytes: FILE.length })]);
      expect(ctx.event.data.reply_to).toMatchObject({ message_id: parentTs, attachments: [], unavailable: expect.stringMatching(/^Slack did not give it/) });
    } finally {
      await slowFile.close();
    }
  });

  /** Blobs under artifacts/ that no artifact row names. */
  const unnamedBlobs = async () => {
    const named = new Set((await host.query<{ r2_key: string }>("SELECT r2_key FROM artifact")).map((r) => r.r2_key));
    return (await host.r2Keys("artifacts/")).filter((k) => !named.has(k));
  };

  it("leaves no blob of a reply's own file behind when its recording fails after the file was stored alongside the parent's read", async () => {
    const parentTs = "1799990007.000100";
    threadParents.set(parentTs, { type: "message", user: "U77", text: "which one?", ts: parentTs, thread_ts: parentTs });
    // The read outlasts the file: the file is stored by the time the event is recorded.
    slowParents.set(parentTs, 600);
    const reply = message("C-THREAD-BLIP", "<@UBOT> this file", { subtype: "file_share", thread_ts: parentTs, parent_user_id: "U77" });
    const eventId = `slack:${botId}:msg:C-THREAD-BLIP:${reply.ts}`;
    // Once the file is asked for (the event's first reads are done), the database fails the next query naming the event:
    // the check that it is no redelivery, made once the parent is read.
    let asked = 0;
    const files = await startFakePlatform(async () => {
      await new Promise((r) => setTimeout(r, 150));
      if (++asked === 1) host.databaseOutage({ queries: 1, matching: eventId });
      return { bytes: FILE, headers: { "content-type": "application/pdf" } };
    });
    try {
      const before = new Set(await unnamedBlobs());
      const file = { id: "F9", name: "v3.pdf", mimetype: "application/pdf", url_private_download: `${files.url}/files/F9/v3.pdf` };
      const ev = callback({ ...reply, files: [file] });
      expect((await post(ev)).status).toBeGreaterThanOrEqual(500);
      expect(files.calls).toHaveLength(1);
      expect((await unnamedBlobs()).filter((k) => !before.has(k))).toEqual([]);
      // Slack's redelivery records it, its file stored once more.
      expect((await post(ev, { headers: { "x-slack-retry-num": "1", "x-slack-retry-reason": "http_error" } })).status).toBe(200);
      const ctx = await runOf("this file", "C-THREAD-BLIP");
      expect(ctx.input.attachments).toEqual([expect.objectContaining({ name: "v3.pdf", size_bytes: FILE.length })]);
    } finally {
      host.databaseOutage(false);
      await files.close();
    }
  });

  it("leaves no blob of a reply's own file behind when the database fails recording's own check that the event is new, after the file was stored alongside the parent's read", async () => {
    const parentTs = "1799990009.000100";
    threadParents.set(parentTs, { type: "message", user: "U77", text: "which one, again?", ts: parentTs, thread_ts: parentTs });
    slowParents.set(parentTs, 600);
    const reply = message("C-THREAD-BLIP2", "<@UBOT> this file, again", { subtype: "file_share", thread_ts: parentTs, parent_user_id: "U77" });
    const eventId = `slack:${botId}:msg:C-THREAD-BLIP2:${reply.ts}`;
    // Once the file is asked for, the next query naming the event (ingest's redelivery check, once the parent is read)
    // is answered late; meanwhile the database is set to fail the one after it: recording's own check (acceptEvent).
    let asked = 0;
    const files = await startFakePlatform(async () => {
      if (++asked === 1) {
        host.databaseOutage({ answerDelayMs: 1_500, matching: eventId, queries: 1 });
        setTimeout(() => host.databaseOutage({ queries: 1, matching: eventId }), 1_200);
      }
      return { bytes: FILE, headers: { "content-type": "application/pdf" } };
    });
    try {
      const before = new Set(await unnamedBlobs());
      const file = { id: "F10", name: "v4.pdf", mimetype: "application/pdf", url_private_download: `${files.url}/files/F10/v4.pdf` };
      expect((await post(callback({ ...reply, files: [file] }))).status).toBeGreaterThanOrEqual(500);
      expect(files.calls).toHaveLength(1);
      expect(await host.query("SELECT 1 FROM event_log WHERE event_id = ?", [eventId])).toEqual([]);
      expect((await unnamedBlobs()).filter((k) => !before.has(k))).toEqual([]);
    } finally {
      host.databaseOutage(false);
      await files.close();
    }
  });

  it("reads a parent again for Slack's redelivery of a reply whose first attempt failed: a failed read is not kept for the other copy", async () => {
    const parentTs = "1799990008.000100";
    threadParents.set(parentTs, { type: "message", user: "U77", text: "ship it friday?", ts: parentTs, thread_ts: parentTs });
    const reply = message("C-THREAD-AGAIN", "<@UBOT> agreed?", { thread_ts: parentTs, parent_user_id: "U77" });
    // Slack fails the first read, and the database the recording after it: the request fails, and Slack redelivers.
    failingParents.set(parentTs, () => host.databaseOutage({ queries: 1, matching: `slack:${botId}:msg:C-THREAD-AGAIN:${reply.ts}` }));
    const ev = callback(reply);
    try {
      expect((await post(ev)).status).toBeGreaterThanOrEqual(500);
    } finally {
      host.databaseOutage(false);
    }
    expect((await post(ev, { headers: { "x-slack-retry-num": "1", "x-slack-retry-reason": "http_error" } })).status).toBe(200);
    const ctx = await runOf("agreed?", "C-THREAD-AGAIN");
    expect(repliesCalls(parentTs)).toHaveLength(2);
    expect(ctx.event.data.reply_to).toEqual({ message_id: parentTs, actor: { actor_type: "user", actor_id: "U77", actor_name: null }, text: "ship it friday?", quote: null, attachments: [], unavailable: null });
  });

  it("runs a reply whose parent Slack will not give (no history scope), saying why in reply_to.unavailable", async () => {
    unscopedChannels.add("C-THREAD-NOSCOPE");
    const parentTs = "1799990001.000100";
    const ev = callback(message("C-THREAD-NOSCOPE", "<@UBOT> thoughts?", { thread_ts: parentTs, parent_user_id: "U77" }));
    expect((await post(ev)).status).toBe(200);
    const ctx = await runOf("thoughts?", "C-THREAD-NOSCOPE");
    const why = "Slack did not give it: missing_scope (the app needs the channels:history scope)";
    expect(ctx.event.data.reply_to).toEqual({ message_id: parentTs, actor: null, text: null, quote: null, attachments: [], unavailable: why });
    const [row] = await host.query<{ metadata_json: string }>("SELECT metadata_json FROM event_log WHERE event_id = ?", [`slack:${botId}:msg:C-THREAD-NOSCOPE:${ev.event.ts}`]);
    expect(JSON.parse(row.metadata_json).attachments_unavailable).toBe(`the replied message ${parentTs} (${why})`);
    await waitFor(() => postsTo("C-THREAD-NOSCOPE").some((c) => c.body.thread_ts === parentTs), 15_000, "the answer in the thread");
  });
});

describe("Slack: what this file sent and was answered", () => {
  it("keeps the bot's credentials out of every answer, record, stored payload and log line", () => platform.keepsSecretsOut());
});
