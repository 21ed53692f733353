import { beforeAll, describe, expect, it } from "vitest";
import { settledRefusals } from "../support/settled-refusals";
import { namedLogLines, runEndedLines } from "../support/host";
import { gapsBetween, startFakePlatform, waitFor } from "../support/fake-platform";
import { useSlackPlatform, type SlackPlatform } from "../support/slack-platform";

/** Slack events in and answers out: signatures, retries, streaming, limits, refusals, shared files, secrets. */
const platform = useSlackPlatform();
const { state, BOT_TOKEN, SIGNING_SECRET, FILE, FORGED_LINE, FORGED_CHANNEL, ECHO_CHANNEL, BOT_USER, throttledChannels, failingChannels, archivedChannels, answered, sign, post, callback, message, postsTo, updatesIn, contextFor } = platform;
let host: SlackPlatform["host"];
let fake: SlackPlatform["fake"];
let runner: SlackPlatform["runner"];
let botId: string;
let webhookUrl: string;
beforeAll(() => void ({ host, fake, runner, botId, webhookUrl } = platform));

describe("Slack: Events API in, Web API out", () => {
  it("answers the url_verification challenge of a signed request", async () => {
    const res = await post({ token: "legacy-verification-token", type: "url_verification", challenge: "challenge-abc" });
    expect(res.status).toBe(200);
    expect(JSON.parse(res.text)).toEqual({ challenge: "challenge-abc" });
  });

  it("runs a channel message and posts the reply in the channel, with the bot token", async () => {
    const ev = callback(message("C100", "hello slack"));
    const res = await post(ev);
    expect(res.status).toBe(200);
    const [reply] = await waitFor(() => postsTo("C100").length > 0 && postsTo("C100"));
    expect(reply.body).toEqual({ channel: "C100", text: "echo: hello slack" });
    const [ctx] = contextFor("hello slack");
    expect(ctx.event).toMatchObject({ event_id: `slack:${botId}:msg:C100:${ev.event.ts}`, source: "slack", source_event_type: "message" });
    expect(ctx.conversation).toMatchObject({ conversation_id: "C100", thread_id: null, workspace_id: "acme", bot_id: botId, sender_id: "U42" });
    expect(ctx.delivery).toMatchObject({ surface: "slack", reply_target: { channel: "C100", thread_ts: null }, supports_edit: true, supports_streaming: true, max_message_size: 4000 });
    // The legacy verification token is not kept with the raw payload.
    const raw = JSON.parse(new TextDecoder().decode((await host.r2Object(ctx.event.raw_ref))!));
    expect(raw.token).toBeUndefined();
    expect(raw.event.text).toBe("hello slack");
  });

  it("shows text literally both ways: what the user typed reaches the runner, and an answer can never ping or link", async () => {
    await post(callback(message("C150", "a &lt;b&gt; &amp;&lt;!channel&gt;")));
    const [reply] = await waitFor(() => postsTo("C150").length > 0 && postsTo("C150"));
    expect(contextFor("a <b> &<!channel>")).toHaveLength(1);
    expect(reply.body.text).toBe("echo: a &lt;b&gt; &amp;&lt;!channel&gt;");
  });

  it("replies in the thread a threaded message came from", async () => {
    await post(callback(message("C200", "in thread", { thread_ts: "1799999999.000100" })));
    const [reply] = await waitFor(() => postsTo("C200").length > 0 && postsTo("C200"));
    expect(reply.body).toMatchObject({ channel: "C200", thread_ts: "1799999999.000100" });
    expect(contextFor("in thread")[0].conversation).toMatchObject({ conversation_id: "C200", thread_id: "1799999999.000100" });
  });

  it("names a run's bot and workspace in its view, so an operator reads its conversation from it", async () => {
    await post(callback(message("C210", "whose run", { thread_ts: "1799999998.000100" })));
    await waitFor(() => postsTo("C210").length > 0);
    const runId = contextFor("whose run")[0].run_id;
    const view = (await host.admin("GET", `/v1/runs/${runId}`)).body;
    expect(view).toMatchObject({ conversation_id: "C210", thread_id: "1799999998.000100", workspace_id: "acme", bot_id: botId });
    const listed = (await host.admin("GET", `/v1/runs?bot_id=${botId}&conversation_id=C210`)).body.items;
    expect(listed).toEqual([expect.objectContaining({ run_id: runId, workspace_id: "acme", bot_id: botId })]);
    // The view's names are the conversation read's parameters: without workspace_id, a workspace's bot's chat is another one.
    const names = new URLSearchParams({ conversation_id: view.conversation_id, thread_id: view.thread_id, workspace_id: view.workspace_id, bot_id: view.bot_id });
    const transcript = (await host.admin("GET", `/v1/conversations/transcript?${names}`)).body.items;
    expect(transcript.map((item: { role: string }) => item.role)).toEqual(["assistant", "user"]);
  });

  it("refuses a bad signature, a timestamp older than 5 minutes and missing headers with 401", async () => {
    const before = runner.calls.length;
    const ev = callback(message("C300", "forged"));
    const badSig = await post(ev, { signature: sign(Math.floor(Date.now() / 1000), JSON.stringify(ev), "another-secret-0123456789") });
    const old = Math.floor(Date.now() / 1000) - 6 * 60;
    const stale = await post(ev, { timestamp: old, signature: sign(old, JSON.stringify(ev)) });
    const missing = await fetch(webhookUrl, { method: "POST", body: JSON.stringify(ev) });
    answered.push(await missing.text());
    for (const status of [badSig.status, stale.status, missing.status]) expect(status).toBe(401);
    expect(JSON.parse(stale.text).error.message).toMatch(/5 minutes/);
    // Nothing was recorded, so nothing can run.
    expect(await host.query("SELECT 1 FROM event_log WHERE conversation_id = 'C300'")).toEqual([]);
    expect(runner.calls.length).toBe(before);
  });

  it("never runs a retried delivery or the app_mention of the same message twice, nor an edit of a message naming the bot", async () => {
    const msg = message("C400", "<@UBOT> once please");
    const ev = callback(msg);
    await post(ev);
    await waitFor(() => postsTo("C400").length > 0);
    // Slack's retry: the same event, signed anew, with X-Slack-Retry-Num.
    expect((await post(ev, { headers: { "x-slack-retry-num": "1", "x-slack-retry-reason": "http_timeout" } })).status).toBe(200);
    expect((await post(ev, { headers: { "x-slack-retry-num": "2", "x-slack-retry-reason": "http_timeout" } })).status).toBe(200);
    // The same message reported again as app_mention, under another event id.
    expect((await post(callback({ ...msg, type: "app_mention" }))).status).toBe(200);
    // An edit of a message naming the bot (Slack sends app_mention again, marked edited): recorded, not answered, even
    // for a message the host has no record of (its first delivery gone with retention, or the mention added by the edit).
    const edited = callback({ ...message("C400", "<@UBOT> once please, fixed"), type: "app_mention", ts: "1700000400.000001", edited: { user: "U1", ts: "1700000999.000000" } });
    expect((await post(edited)).status).toBe(200);
    expect(await host.query("SELECT source_event_type FROM event_log WHERE event_id = ?", [`slack:${botId}:${edited.event_id}`])).toEqual([{ source_event_type: "app_mention.edited" }]);
    // A barrier instead of a sleep: once a later message of the channel is answered, a second run of the first would have been too.
    await post(callback(message("C400", "marker")));
    await waitFor(() => postsTo("C400").length > 1);
    expect(contextFor("once please")).toHaveLength(1);
    expect(contextFor("once please, fixed")).toEqual([]);
    expect(postsTo("C400")).toHaveLength(2);
  });

  it("streams with chat.update at most once a second and ends on the completed text, not the draft", async () => {
    await post(callback(message("C500", "differ The final answer.")));
    await waitFor(() => updatesIn("C500").length > 0, 15_000, "the correcting update");
    const [first] = postsTo("C500");
    expect(postsTo("C500")).toHaveLength(1);
    expect(first.body.text).toBe("draft that will be replaced");
    const updates = updatesIn("C500");
    expect(updates.at(-1)!.body).toEqual({ channel: "C500", ts: (first.reply!.json as any).ts, text: "The final answer." });
    for (const gap of gapsBetween([first.at, ...updates.map((u) => u.at)])) expect(gap).toBeGreaterThanOrEqual(950);
  });

  it("splits a long reply at 4000 characters in the same thread", async () => {
    await post(callback(message("C600", "long 8500", { thread_ts: "1799999999.000600" })));
    const posts = await waitFor(() => postsTo("C600").length >= 3 && postsTo("C600"));
    expect(posts.every((p) => p.body.text.length <= 4000 && p.body.thread_ts === "1799999999.000600")).toBe(true);
    expect(posts.map((p) => p.body.text).join("")).toHaveLength(8500);
  });

  it("counts `& < >` as the entities Slack gets (`&amp;` is five) against the 4000, so no message sent is longer", async () => {
    // The answer is 2,007 characters, but 8,007 as sent: it went out as one message, twice Slack's limit.
    await post(callback(message("C610", `x${"&lt;&gt;".repeat(1000)}`)));
    const whole = `echo: x${"&lt;&gt;".repeat(1000)}`;
    const posts = await waitFor(() => postsTo("C610").map((p) => p.body.text).join("") === whole && postsTo("C610"));
    expect(posts.map((p) => p.body.text.length).filter((n) => n > 4000)).toEqual([]);
    // No entity cut in two.
    expect(posts.every((p) => !/&[a-z]*$/.test(p.body.text))).toBe(true);

    // A streamed draft too: no chat.update longer than that either.
    const word = "&lt;&gt;".repeat(400);
    await post(callback(message("C620", `stream ${word} ${word} ${word}`)));
    // What each message shows in the end: its last update, else what was posted.
    const shown = () => postsTo("C620").map((p) => updatesIn("C620").filter((u) => u.body.ts === (p.reply!.json as any).ts).at(-1)?.body.text ?? p.body.text);
    await waitFor(() => updatesIn("C620").length > 0 && shown().join("") === `${word} ${word} ${word}`, 15_000, "the streamed answer");
    expect([...postsTo("C620"), ...updatesIn("C620")].map((c) => c.body.text.length).filter((n) => n > 4000)).toEqual([]);
  });

  it("waits out a 429's Retry-After before posting again", async () => {
    throttledChannels.add("C700");
    await post(callback(message("C700", "throttled")));
    const posts = await waitFor(() => postsTo("C700").length >= 2 && postsTo("C700"));
    expect(posts[1].at - posts[0].at).toBeGreaterThanOrEqual(950);
    const runId = contextFor("throttled")[0].run_id;
    const failed = await waitFor(async () => (await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE run_id = ? AND event_type = 'delivery.failed'", [runId]))[0]);
    expect(JSON.parse(failed.data_json)).toMatchObject({ status: 429, retry_after_ms: 1000, will_retry: true });
  });

  it("never posts again after an internal_error, which may have posted the message", async () => {
    failingChannels.add("C710");
    await post(callback(message("C710", "maybe posted")));
    const runId = (await waitFor(() => contextFor("maybe posted")[0])).run_id;
    const failed = await waitFor(async () => (await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE run_id = ? AND event_type = 'delivery.failed'", [runId]))[0]);
    expect(JSON.parse(failed.data_json)).toMatchObject({ operation: "send", code: "slack_internal_error", will_retry: false });
    expect(postsTo("C710")).toHaveLength(1);
  });

  it("stops a reply at the first refusal of a channel archived meanwhile: its other parts and its file are not tried, and it is recorded once", async () => {
    archivedChannels.add("C-ARCHIVED");
    // Three parts, then a text and a file.
    await post(callback(message("C-ARCHIVED", "long 8501")));
    await post(callback(message("C-ARCHIVED", "attach archived.pdf")));
    const runIds = await waitFor(() => {
      const ids = ["long 8501", "attach archived.pdf"].map((text) => contextFor(text)[0]?.run_id);
      return ids.every(Boolean) && ids;
    });
    // Settled: nothing more is tried after each reply's one refusal.
    const failures = await settledRefusals(host, runIds);
    expect(postsTo("C-ARCHIVED").map((p) => p.body.text.slice(0, 18))).toEqual(["line 1 abcdefghija", "here is archived.p"]);
    expect(fake.callsTo(/^\/files\.getUploadURLExternal$/).filter((c) => new URLSearchParams(c.raw).get("filename") === "archived.pdf")).toEqual([]);
    for (const given of failures) expect(given).toEqual([expect.objectContaining({ operation: "send", part: 1, code: "slack_is_archived", will_retry: false })]);
  });

  it("logs a channel id and Slack's error name escaped, each on the host's own line: a crafted one forges no line", async () => {
    await post(callback(message(FORGED_CHANNEL, "fail")));
    const runId = (await waitFor(() => contextFor("fail").find((c) => c.conversation.conversation_id === FORGED_CHANNEL))).run_id;
    const escaped = `CFORGED\\n${FORGED_LINE}`;
    const givenUp = () => namedLogLines(host.logs(), "delivery.failed").filter((line) => line.run_id === runId);
    // The run's end, then its failure notice given up on: Slack refused it.
    await waitFor(() => givenUp().length > 0, 15_000, "the notice given up on");
    const lines = host.logs().split("\n");
    // Both JSON lines name the channel, and Slack's error name, escaped as every log line has them.
    expect(runEndedLines(host.logs(), runId)).toEqual([expect.objectContaining({ status: "failed", conversation_id: escaped, bot_id: botId, platform: "slack" })]);
    expect(givenUp()).toEqual([expect.objectContaining({ code: `slack_channel_not_found\\n${FORGED_LINE}`, platform: "slack", bot_id: botId, conversation_id: escaped })]);
    const runsOwn = [`run ${runId}: `, `{"log":"run.ended","status":"failed","run_id":"${runId}"`, `{"log":"delivery.failed","run_id":"${runId}"`];
    expect(lines.filter((l) => l.includes(FORGED_LINE) && !runsOwn.some((own) => l.startsWith(own)))).toEqual([]);
  });

  it("keeps the bot token out of Slack's error name where the trail, the bot's note and the log keep it", async () => {
    await post(callback(message(ECHO_CHANNEL, "echo")));
    const runId = (await waitFor(() => contextFor("echo").find((c) => c.conversation.conversation_id === ECHO_CHANNEL))).run_id;
    const [failures] = await settledRefusals(host, [runId]);
    expect(failures.map((f) => f.code)).toEqual(["slack_invalid_auth:Bearer [redacted]"]);
    const note = (await host.admin("GET", `/v1/admin/bots/${botId}`)).body.last_delivery_failure;
    expect(JSON.stringify(note)).toContain("slack_invalid_auth:Bearer [redacted]");
    await waitFor(() => namedLogLines(host.logs(), "delivery.failed").some((line) => line.run_id === runId), 15_000, "the reply given up on");
    for (const kept of [JSON.stringify(failures), JSON.stringify(note), host.logs()]) expect(kept).not.toContain(BOT_TOKEN);
  });

  it("downloads a shared file with the bot token into an input artifact", async () => {
    const file = { id: "F1", name: "report.pdf", mimetype: "application/pdf", url_private_download: `${fake.url}/files/F1/report.pdf` };
    await post(callback(message("C800", "see file", { subtype: "file_share", files: [file] })));
    await waitFor(() => postsTo("C800").length > 0);
    const download = fake.callsTo(/^\/files\/F1/)[0];
    expect(download.headers.authorization).toBe(`Bearer ${BOT_TOKEN}`);
    const [ref] = contextFor("see file")[0].input.attachments;
    expect(ref).toMatchObject({ artifact_type: "file", mime_type: "application/pdf", name: "report.pdf", size_bytes: FILE.length });
    expect(await host.r2Object(`artifacts/${ref.artifact_id}`)).toEqual(FILE);

    // A file the host cannot fetch does not lose the message: it runs without it, the reason recorded.
    const gone = { id: "F2", name: "gone.pdf", mimetype: "application/pdf", url_private_download: `${fake.url}/files/F2/gone.pdf` };
    const ev = callback(message("C850", "file gone", { subtype: "file_share", files: [gone] }));
    expect((await post(ev)).status).toBe(200);
    await waitFor(() => postsTo("C850").length > 0);
    expect(contextFor("file gone")[0].input.attachments).toEqual([]);
    const [row] = await host.query<{ metadata_json: string }>("SELECT metadata_json FROM event_log WHERE event_id = ?", [`slack:${botId}:msg:C850:${ev.event.ts}`]);
    expect(JSON.parse(row.metadata_json).attachments_unavailable).toMatch(/HTTP 404/);

    // Nor is a sign-in page stored as the file it stands in for: the message runs without it, with a note.
    const scoped = { id: "F3", name: "contract.pdf", mimetype: "application/pdf", url_private_download: `${fake.url}/files/F3/contract.pdf` };
    const signIn = callback(message("C855", "scoped file", { subtype: "file_share", files: [scoped] }));
    expect((await post(signIn)).status).toBe(200);
    await waitFor(() => postsTo("C855").length > 0);
    expect(contextFor("scoped file")[0].input.attachments).toEqual([]);
    const [noted] = await host.query<{ metadata_json: string }>("SELECT metadata_json FROM event_log WHERE event_id = ?", [`slack:${botId}:msg:C855:${signIn.event.ts}`]);
    expect(JSON.parse(noted.metadata_json).attachments_unavailable).toMatch(/^contract\.pdf \(.*web page \(text\/html\), not the application\/pdf/);
  });

  it("acknowledges within 3 s even when a shared file is slow: the message runs without it, the reason recorded", async () => {
    const slow = await startFakePlatform(async () => {
      await new Promise((r) => setTimeout(r, 5_000));
      return { bytes: FILE, headers: { "content-type": "application/pdf" } };
    });
    try {
      const file = { id: "F7", name: "slow.pdf", mimetype: "application/pdf", url_private_download: `${slow.url}/files/F7/slow.pdf` };
      const ev = callback(message("C870", "slow file", { subtype: "file_share", files: [file] }));
      const started = Date.now();
      expect((await post(ev)).status).toBe(200);
      expect(Date.now() - started).toBeLessThan(3_000);
      await waitFor(() => postsTo("C870").length > 0);
      expect(contextFor("slow file")[0].input.attachments).toEqual([]);
      const [row] = await host.query<{ metadata_json: string }>("SELECT metadata_json FROM event_log WHERE event_id = ?", [`slack:${botId}:msg:C870:${ev.event.ts}`]);
      expect(JSON.parse(row.metadata_json).attachments_unavailable).toMatch(/could not be fetched|no time left/);
    } finally {
      await slow.close();
    }
  });

  it("never carries the bot token along a redirect from Slack's file host to another host", async () => {
    const elsewhere = await startFakePlatform(() => ({ bytes: FILE, headers: { "content-type": "application/pdf" } }));
    state.fileMovedTo = `${elsewhere.url.replace("127.0.0.1", "localhost")}/files/F10/moved.pdf`;
    try {
      const file = { id: "F10", name: "moved.pdf", mimetype: "application/pdf", url_private_download: `${fake.url}/files/F10/moved.pdf` };
      await post(callback(message("C861", "redirected file", { subtype: "file_share", files: [file] })));
      await waitFor(() => postsTo("C861").length > 0);
      expect(fake.callsTo(/^\/files\/F10/)).toHaveLength(1);
      const [download] = elsewhere.callsTo(/^\/files\/F10/);
      expect(download).toBeDefined();
      expect(download.headers.authorization).toBeUndefined();
      expect(contextFor("redirected file")[0].input.attachments).toHaveLength(1);
    } finally {
      state.fileMovedTo = null;
      await elsewhere.close();
    }
  });

  it("never sends the bot token to a file URL outside Slack's file host", async () => {
    const elsewhere = await startFakePlatform(() => ({ bytes: FILE, headers: { "content-type": "application/pdf" } }));
    try {
      const file = { id: "F9", name: "lure.pdf", mimetype: "application/pdf", url_private_download: `${elsewhere.url.replace("127.0.0.1", "localhost")}/files/F9/lure.pdf` };
      await post(callback(message("C860", "foreign file", { subtype: "file_share", files: [file] })));
      await waitFor(() => postsTo("C860").length > 0);
      const [download] = elsewhere.callsTo(/^\/files\/F9/);
      expect(download).toBeDefined();
      expect(download.headers.authorization).toBeUndefined();
    } finally {
      await elsewhere.close();
    }
  });

  it("records deletions, joins and bot messages without running them", async () => {
    const before = runner.calls.length;
    const deleted = callback({ type: "message", subtype: "message_deleted", channel: "C900", deleted_ts: "1800000000.000001", ts: "1800000005.000001", previous_message: { user: "U42", ts: "1800000000.000001", text: "oops" } });
    const joined = callback({ type: "member_joined_channel", user: "U77", channel: "C900", channel_type: "C", inviter: "U42" });
    const ours = callback(message("C900", "echo: from the bot", { bot_id: "B1", subtype: "bot_message" }));
    // Another bot's thread parent naming the bot, edited: Slack sends its app_mention again with its own ts as its thread_ts (the message is in the channel); and a bot's reply in a thread.
    const parentTs = `${++state.messageTs}.000200`;
    const parentEdited = callback({ type: "app_mention", channel: "C900", bot_id: "B1", subtype: "bot_message", text: "<@UBOT> status, fixed", ts: parentTs, thread_ts: parentTs, edited: { user: "B1", ts: `${++state.messageTs}.000300` } });
    const inThread = callback(message("C900", "echo: in the thread", { bot_id: "B1", subtype: "bot_message", thread_ts: parentTs }));
    for (const ev of [deleted, joined, ours, parentEdited, inThread]) expect((await post(ev)).status).toBe(200);
    const rows = await host.query<{ event_type: string; source_event_type: string; actor_id: string | null; thread_id: string | null }>("SELECT event_type, source_event_type, actor_id, thread_id FROM event_log WHERE conversation_id = 'C900' ORDER BY seq");
    expect(rows).toEqual([
      { event_type: "message.recalled", source_event_type: "message.message_deleted", actor_id: "U42", thread_id: null },
      { event_type: "group.member_joined", source_event_type: "member_joined_channel", actor_id: "U77", thread_id: null },
      { event_type: "platform.unhandled", source_event_type: "message.bot_message", actor_id: null, thread_id: null },
      { event_type: "platform.unhandled", source_event_type: "message.bot_message", actor_id: null, thread_id: null },
      { event_type: "platform.unhandled", source_event_type: "message.bot_message", actor_id: null, thread_id: parentTs },
    ]);
    // No agent takes these types: recorded unbound, so nothing can run.
    expect(await host.query("SELECT run_id FROM event_log WHERE conversation_id = 'C900' AND run_id IS NOT NULL")).toEqual([]);
    expect(runner.calls.length).toBe(before);
  });

  it("delivers a welcome for a join to the channel, outside any thread; a recall has nowhere to reply and says so", async () => {
    await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "slack-welcome", scope: { type: "bot", id: botId }, eventTypes: ["group.member_joined", "message.recalled"] });
    expect((await post(callback({ type: "member_joined_channel", user: "U78", channel: "C910", channel_type: "C" }))).status).toBe(200);
    const [welcome] = await waitFor(() => postsTo("C910").length > 0 && postsTo("C910"), 10_000, "the welcome");
    expect(welcome.body.thread_ts).toBeUndefined();
    const joinContext = runner.contexts.find((c) => c.conversation.conversation_id === "C910");
    expect(joinContext.delivery).toMatchObject({ surface: "slack", reply_target: { channel: "C910" }, supports_streaming: true });

    const deleted = callback({ type: "message", subtype: "message_deleted", channel: "C920", deleted_ts: "1800000000.000002", ts: "1800000006.000001", previous_message: { user: "U42", ts: "1800000000.000002", text: "gone" } });
    expect((await post(deleted)).status).toBe(200);
    const recallContext = await waitFor(() => runner.contexts.find((c) => c.conversation.conversation_id === "C920"), 10_000, "the recall's run");
    expect(recallContext.delivery).toMatchObject({ surface: "slack", supports_streaming: false, supports_edit: false });
    expect(recallContext.delivery.reply_target).toBeUndefined();
  });

  it("records the deletion of the bot's own message in its channel, but as no recall: no agent bound to message.recalled runs for it", async () => {
    // The agent bound to message.recalled above is still bound: a person's deletion runs it, the bot's own does not.
    const own = { user: BOT_USER, bot_id: "B0BOT", app_id: "A1", ts: "1800000000.000003", text: "echo: an answer" };
    const deleted = callback({ type: "message", subtype: "message_deleted", channel: "C930", deleted_ts: own.ts, ts: "1800000007.000001", previous_message: own });
    expect((await post(deleted)).status).toBe(200);
    // Recorded, and dispatched or not, before the webhook answered.
    expect(await host.query("SELECT event_type, source_event_type, actor_id, run_id FROM event_log WHERE conversation_id = 'C930'")).toEqual([
      { event_type: "platform.unhandled", source_event_type: "message.message_deleted.self", actor_id: null, run_id: null },
    ]);
    expect(runner.contexts.filter((c) => c.conversation.conversation_id === "C930")).toEqual([]);
  });

  it("keeps the bot token and signing secret out of every answer, record and log line", async () => {
    await post(callback(message("C950", "forged")), { signature: "v0=deadbeef" });
    const got = await host.admin("GET", `/v1/admin/bots/${botId}`);
    answered.push(JSON.stringify(got.body));
    expect(got.body.credential_fields).toEqual(["bot_token", "signing_secret"]);
    const records = await host.query<{ row: string }>("SELECT data_json || metadata_json || COALESCE(input_json, '') AS row FROM event_log");
    const raws = await Promise.all((await host.r2Keys("raw/")).map(async (k) => new TextDecoder().decode((await host.r2Object(k))!)));
    expect(host.logs()).toMatch(/webhook refused/);
    for (const secret of [BOT_TOKEN, SIGNING_SECRET, "legacy-verification-token"]) {
      for (const text of [...answered, ...records.map((r) => r.row), ...raws, host.logs()]) expect(text).not.toContain(secret);
    }
  });
});
