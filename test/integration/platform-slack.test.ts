import { createHmac } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost, recordedAnswer } from "../support/host";
import { settledRefusals } from "../support/settled-refusals";
import { ANSWER_FILE, gapsBetween, startChatRunner, startFakePlatform, waitFor, type FakeReply, type PlatformCall } from "../support/fake-platform";
import { slackMrkdwnProblem } from "../support/slack-mrkdwn";
import { TABLE_ANSWER, TABLE_ANSWER_SLACK } from "../support/markdown-sample";

const BOT_TOKEN = "xoxb-TEST-slack-bot-token-1234567890";
const SIGNING_SECRET = "slack-signing-secret-0123456789abcdef";
const FILE = new Uint8Array([0x25, 0x50, 0x44, 0x46, 9, 8, 7]);
/** Channels whose first chat.postMessage the fake answers 429 with Retry-After: 1. */
const throttledChannels = new Set<string>();
/** Channels whose first chat.postMessage the fake answers `internal_error`: Slack says the post may have happened anyway. */
const failingChannels = new Set<string>();
/** Channels archived while their runs went on: Slack refuses every post there with `is_archived`. */
const archivedChannels = new Set<string>();
/** A channel id and an error name as a forger would write them: each would start a log line that reads as the host's. */
const FORGED_LINE = "run run_forged: completed";
const FORGED_CHANNEL = `CFORGED\n${FORGED_LINE}`;

let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startChatRunner>>;
let botId: string;
let webhookUrl: string;
let ts = 1_700_000_000;
const answered: string[] = [];

let uploads = 0;
/** Files (by name) whose first files.getUploadURLExternal, or first bytes upload, loses its connection before an answer. */
const cutAsk = new Set<string>();
const cutBytes = new Set<string>();
const uploadNames = new Map<string, string>();
let fileMovedTo: string | null = null;
function slackApi(call: PlatformCall): FakeReply | Promise<FakeReply> {
  // Upload URLs are Slack's own pre-signed ones: the bot token has no business there.
  if (call.path.startsWith("/upload/") && cutBytes.delete(uploadNames.get(call.path.split("/").pop()!)!)) return { drop: true };
  if (call.path.startsWith("/upload/")) return call.headers.authorization ? { status: 400, json: {} } : { json: {} };
  // An upload URL that has moved: a 307 keeps the method and the body, as an HTTP client follows it.
  if (call.path.startsWith("/upload-moved/")) return { status: 307, headers: { location: `${fake.url}/upload/${call.path.split("/").pop()}` }, json: {} };
  if (call.headers.authorization !== `Bearer ${BOT_TOKEN}`) return { json: { ok: false, error: "invalid_auth" } };
  if (call.path === "/files/F1/report.pdf") return { bytes: FILE, headers: { "content-type": "application/pdf" } };
  // A file Slack's file host sends elsewhere (a CDN): the token must not follow it there.
  if (call.path === "/files/F10/moved.pdf" && fileMovedTo) return { status: 302, headers: { location: fileMovedTo }, json: {} };
  // What Slack answers for a file its token may not read (no files:read scope): its sign-in page.
  if (call.path === "/files/F3/contract.pdf") return { bytes: Buffer.from("<!DOCTYPE html><html><body>Sign in to Slack</body></html>"), headers: { "content-type": "text/html; charset=utf-8" } };
  if (call.path === "/chat.postMessage") {
    if (throttledChannels.delete(call.body.channel)) return { status: 429, headers: { "retry-after": "1" }, json: { ok: false, error: "ratelimited" } };
    if (failingChannels.delete(call.body.channel)) return { json: { ok: false, error: "internal_error" } };
    if (archivedChannels.has(call.body.channel)) return { json: { ok: false, error: "is_archived" } };
    // A crafted channel, refused with an error name that holds a line break too: both reach the host's log lines.
    if (String(call.body.channel).startsWith(FORGED_CHANNEL)) return { json: { ok: false, error: `channel_not_found\n${FORGED_LINE}` } };
    return { json: { ok: true, channel: call.body.channel, ts: `${++ts}.000100` } };
  }
  if (call.path === "/files.getUploadURLExternal") {
    const filename = new URLSearchParams(call.raw).get("filename")!;
    if (cutAsk.delete(filename)) return { drop: true };
    const id = `F${++uploads}UP`;
    uploadNames.set(id, filename);
    const moved = filename === "moved.png";
    return { json: { ok: true, upload_url: `${fake.url}/${moved ? "upload-moved" : "upload"}/${id}`, file_id: id } };
  }
  if (call.path === "/files.completeUploadExternal") return { json: { ok: true, files: JSON.parse(new URLSearchParams(call.raw).get("files") ?? "[]") } };
  if (call.path === "/chat.update") return { json: { ok: true, channel: call.body.channel, ts: call.body.ts } };
  if (call.path === "/conversations.replies") {
    const asked = new URLSearchParams(call.raw);
    // An app given no channels:history scope: Slack names the one it needs.
    if (unscopedChannels.has(asked.get("channel")!)) return { json: { ok: false, error: "missing_scope", needed: "channels:history", provided: "app_mentions:read,chat:write" } };
    // A parent Slack fails to give once (its first read answers `internal_error`), then gives; `then` runs as it fails.
    const failOnce = failingParents.get(asked.get("ts")!);
    if (failOnce) {
      failingParents.delete(asked.get("ts")!);
      failOnce();
      return { json: { ok: false, error: "internal_error" } };
    }
    const parent = threadParents.get(asked.get("ts")!);
    const answer: FakeReply = parent ? { json: { ok: true, messages: [parent], has_more: true } } : { json: { ok: false, error: "thread_not_found" } };
    const slow = slowParents.get(asked.get("ts")!);
    return slow === undefined ? answer : new Promise((resolve) => setTimeout(() => resolve(answer), slow));
  }
  return { status: 404, json: { ok: false, error: "unknown_method" } };
}
/** Thread parents conversations.replies gives, by their `ts`; channels where the app lacks the scope to read them. */
const threadParents = new Map<string, Record<string, unknown>>();
const unscopedChannels = new Set<string>();
/** Thread parents conversations.replies answers only after this many ms, by their `ts`. */
const slowParents = new Map<string, number>();
/** Thread parents whose next read Slack answers `internal_error`, by their `ts`, with what the test does meanwhile. */
const failingParents = new Map<string, () => void>();

beforeAll(async () => {
  fake = await startFakePlatform(slackApi);
  runner = await startChatRunner("slack-chat");
  host = await startTestHost({ captureLogs: true });
  const created = await host.admin("POST", "/v1/admin/bots", { platform: "slack", workspace_id: "acme", api_base_url: fake.url, credentials: { bot_token: BOT_TOKEN, signing_secret: SIGNING_SECRET } });
  expect(created.status).toBe(201);
  answered.push(JSON.stringify(created.body));
  botId = created.body.bot_id;
  webhookUrl = created.body.webhook_url;
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "slack-agent", scope: { type: "bot", id: botId } });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

const sign = (timestamp: number, body: string, secret = SIGNING_SECRET) => `v0=${createHmac("sha256", secret).update(`v0:${timestamp}:${body}`).digest("hex")}`;

async function post(payload: unknown, opts: { timestamp?: number; signature?: string; headers?: Record<string, string> } = {}) {
  const body = JSON.stringify(payload);
  const timestamp = opts.timestamp ?? Math.floor(Date.now() / 1000);
  const res = await fetch(webhookUrl, {
    method: "POST",
    headers: { "content-type": "application/json", "x-slack-request-timestamp": String(timestamp), "x-slack-signature": opts.signature ?? sign(timestamp, body), ...opts.headers },
    body,
  });
  const text = await res.text();
  answered.push(text);
  return { status: res.status, text };
}

let eventSeq = 0;
/** The bot's own user, as each envelope's `authorizations` names it. */
const BOT_USER = "UBOT";
function callback(event: Record<string, unknown>, eventId = `Ev${++eventSeq}TEST`) {
  const authorizations = [{ enterprise_id: null, team_id: "T1", user_id: BOT_USER, is_bot: true, is_enterprise_install: false }];
  return { token: "legacy-verification-token", team_id: "T1", api_app_id: "A1", type: "event_callback", event_id: eventId, event_time: Math.floor(Date.now() / 1000), authorizations, event };
}
let messageTs = 1_800_000_000;
const message = (channel: string, text: string, extra: Record<string, unknown> = {}) => ({ type: "message", channel, channel_type: "channel", user: "U42", text, ts: `${++messageTs}.000200`, team: "T1", ...extra });

const postsTo = (channel: string) => fake.callsTo(/^\/chat\.postMessage$/).filter((c) => c.body.channel === channel);
const updatesIn = (channel: string) => fake.callsTo(/^\/chat\.update$/).filter((c) => c.body.channel === channel);
const contextFor = (text: string) => runner.contexts.filter((c) => c.input.text === text);
/** The delivery records of an answer's files, in order. */
async function fileRecords(runId: string) {
  const rows = await host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type LIKE 'delivery.%' ORDER BY seq", [runId]);
  return rows.map((r) => ({ type: r.event_type, ...JSON.parse(r.data_json) })).filter((r) => r.operation === "send_file");
}

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
    // The run's end, then its failure notice given up on: Slack refused it.
    await waitFor(() => host.logs().includes(`run ${runId}: reply not delivered`), 15_000, "the notice given up on");
    const lines = host.logs().split("\n");
    expect(lines.find((l) => l.startsWith(`run ${runId}: failed`))).toContain(`conversation ${escaped}, bot ${botId}`);
    expect(lines.find((l) => l.startsWith(`run ${runId}: reply not delivered`))).toContain(`given up (slack_channel_not_found\\n${FORGED_LINE}); slack bot ${botId}, conversation ${escaped}, `);
    expect(lines.filter((l) => l.includes(FORGED_LINE) && !l.startsWith(`run ${runId}: `))).toEqual([]);
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
    fileMovedTo = `${elsewhere.url.replace("127.0.0.1", "localhost")}/files/F10/moved.pdf`;
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
      fileMovedTo = null;
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
    const parentTs = `${++messageTs}.000200`;
    const parentEdited = callback({ type: "app_mention", channel: "C900", bot_id: "B1", subtype: "bot_message", text: "<@UBOT> status, fixed", ts: parentTs, thread_ts: parentTs, edited: { user: "B1", ts: `${++messageTs}.000300` } });
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
      { type: "message", subtype: "message_changed", channel: "C-ECHO", hidden: true, ts: `${++messageTs}.000300`, message: { type: "message", text: "echo: hi there", ts: post1.ts, edited: { user: "B0BOT", ts: `${messageTs}.000300` }, ...mine }, previous_message: { ...post1 } },
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
    const edit = { type: "message", subtype: "message_changed", channel: "C-VIA-APP-EDIT", hidden: true, ts: `${++messageTs}.000300`, message: { type: "message", text: "typo via app", ts: typo.ts, edited: { user: "U42", ts: `${messageTs}.000300` }, ...viaApp } };
    await post(callback(edit));
    await waitFor(() => contextFor("typo via app").length > 0, 15_000, "the edited message's run");
    const gone = callback({ type: "message", subtype: "message_deleted", channel: "C-VIA-APP", deleted_ts: msg.ts, ts: `${++messageTs}.000400`, previous_message: { ...viaApp, ts: msg.ts, text: msg.text } });
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
    expect((await post(callback({ type: "message", subtype: "message_changed", hidden: true, channel: "C-THREAD-OWN-GONE", ts: `${++messageTs}.000300`, message: tombstone }))).status).toBe(200);
    await post(callback(message("C-THREAD-OWN-GONE", "and now?", { thread_ts: answerTs, parent_user_id: BOT_USER })));
    expect((await runOf("and now?", "C-THREAD-OWN-GONE")).event.data.reply_to).toMatchObject({ message_id: answerTs, text: null, attachments: [], unavailable: "it was deleted" });
  });

  it("takes a recorded parent edited since with its newest words, as history keeps them, not its first ones", async () => {
    const parent = message("C-THREAD-EDIT", "<@UBOT> ship on friday?");
    await post(callback(parent));
    await runOf("ship on friday?", "C-THREAD-EDIT");
    const editTs = `${++messageTs}.000300`;
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
      ["tombstone", (ts) => ({ type: "message", subtype: "message_changed", hidden: true, channel: "C-THREAD-GONE", ts: `${++messageTs}.000300`, message: tombstone(ts) }), { text: null, unavailable: "it was deleted" }],
      ["deleted", (ts) => ({ type: "message", subtype: "message_deleted", hidden: true, channel: "C-THREAD-GONE", ts: `${++messageTs}.000300`, deleted_ts: ts, previous_message: { type: "message", user: "U77", ts, thread_ts: ts, text: "the plan" } }), { text: null, unavailable: "it was deleted" }],
      ["edited", (ts) => ({ type: "message", subtype: "message_changed", hidden: true, channel: "C-THREAD-GONE", ts: `${++messageTs}.000300`, message: { type: "message", user: "U77", text: "the new plan", ts, thread_ts: ts, edited: { user: "U77", ts: `${messageTs}.000300` } } }), { text: "the new plan", unavailable: null }],
      // A parent naming the bot, edited: Slack sends its app_mention again, marked edited, with its own ts as its thread_ts.
      ["mention edited", (ts) => ({ type: "app_mention", channel: "C-THREAD-GONE", user: "U77", text: "<@UBOT> the new plan", ts, thread_ts: ts, edited: { user: "U77", ts: `${++messageTs}.000300` } }), { text: "@UBOT the new plan", unavailable: null }],
    ];
    for (const [label, revision, after] of revisions) {
      const parentTs = `${++messageTs}.000100`;
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

describe("Slack: answers' Markdown as mrkdwn", () => {
  const ANSWER = [
    "# Plan for `parse_config`",
    "Use **bold _and italic_**, ~~old~~ and `a < b && c`; see [the docs](https://example.com/wiki/Foo_(bar)), not <!channel>.",
    "- keep snake_case_names & <tags>",
    "```python",
    'print(a < b and "&")',
    "```",
  ].join("\n");
  const RENDERED = [
    "*Plan for `parse_config`*",
    "Use *bold _and italic_*, ~old~ and `a &lt; b &amp;&amp; c`; see <https://example.com/wiki/Foo_(bar)|the docs>, not &lt;!channel&gt;.",
    "• keep snake_case_names &amp; &lt;tags&gt;",
    "```",
    'print(a &lt; b and "&amp;")',
    "```",
  ].join("\n");
  /** A message's text as Slack delivers it: `& < >` escaped. */
  const typed = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  const bodiesIn = (channel: string) => fake.callsTo(/^\/chat\.(postMessage|update)$/).filter((c) => c.body.channel === channel).map((c) => c.body);

  it("posts an answer's Markdown as mrkdwn, a link's < > the only ones raw, or as it is for a plain agent; the ledger and the Transcript keep the Markdown", async () => {
    await post(callback(message("C-MD", typed(`samefinal ${ANSWER}`))));
    const [reply] = await waitFor(() => postsTo("C-MD").length > 0 && postsTo("C-MD"), 15_000, "the answer");
    expect(reply.body.text).toBe(RENDERED);
    expect(slackMrkdwnProblem(reply.body.text)).toBeNull();
    const runId = contextFor(`samefinal ${ANSWER}`)[0].run_id;
    await host.waitForRun(runId);
    expect(await recordedAnswer(host, runId)).toEqual({ ledger: ANSWER, transcript: ANSWER });

    // An agent whose delivery_policy.format is plain: the answer as it is, only escaped.
    const agent = { agent_id: "slack-plain", name: "plain", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: "C-PLAIN", bot_id: botId }, delivery_policy: { format: "plain" } };
    expect((await host.admin("POST", "/v1/admin/agents", agent)).status).toBe(201);
    await post(callback(message("C-PLAIN", typed(`samefinal ${ANSWER}`))));
    const [plain] = await waitFor(() => postsTo("C-PLAIN").length > 0 && postsTo("C-PLAIN"), 15_000, "the plain answer");
    expect(plain.body.text).toBe(typed(ANSWER));
  });

  it("streams with every post and chat.update well-formed mrkdwn: an unpaired marker is text, a code block still open is closed", async () => {
    const words = "**Step one** uses `x < y` & then:\n```js\nconst a = 1;\nconst b = a && 2;\nlet c = [a, b];\nreturn c;\n```\n~~done~~ *ok*";
    await post(callback(message("C-MD-STREAM", typed(`stream ${words}`))));
    const final = "*Step one* uses `x &lt; y` &amp; then:\n```\nconst a = 1;\nconst b = a &amp;&amp; 2;\nlet c = [a, b];\nreturn c;\n```\n~done~ _ok_";
    await waitFor(() => updatesIn("C-MD-STREAM").some((c) => c.body.text === final), 20_000, "the final update");
    const bodies = bodiesIn("C-MD-STREAM");
    expect(bodies.length).toBeGreaterThan(2);
    for (const body of bodies) expect(slackMrkdwnProblem(body.text), body.text).toBeNull();
    // A draft shown mid-block: the block open in the Markdown, closed in the mrkdwn.
    expect(bodies.some((b) => b.text.includes("```\nconst a = 1;") && !b.text.includes("done"))).toBe(true);
    expect(postsTo("C-MD-STREAM")).toHaveLength(1);
  });

  it("posts a table as an aligned code block (Slack has none) and nested bullets by depth; streamed, no update shows a line of pipes", async () => {
    await post(callback(message("C-MD-TABLE", typed(`samefinal ${TABLE_ANSWER}`))));
    const [reply] = await waitFor(() => postsTo("C-MD-TABLE").length > 0 && postsTo("C-MD-TABLE"), 15_000, "the answer");
    expect(reply.body.text).toBe(TABLE_ANSWER_SLACK);
    const words = "Totals:\n| Item | Qty |\n|---|--:|\n| pens | 3 |\n| paper | 120 |\ndone";
    await post(callback(message("C-MD-TABLE-STREAM", typed(`stream ${words}`))));
    const final = "Totals:\n```\nItem  │ Qty\n──────┼────\npens  │   3\npaper │ 120\n```\ndone";
    await waitFor(() => updatesIn("C-MD-TABLE-STREAM").some((c) => c.body.text === final), 20_000, "the final update");
    const bodies = bodiesIn("C-MD-TABLE-STREAM");
    expect(bodies.length).toBeGreaterThan(2);
    for (const body of bodies) {
      expect(slackMrkdwnProblem(body.text), body.text).toBeNull();
      expect(body.text).not.toContain("|");
    }
  });

  it("leaves room for closing a code block the answer leaves open, posted or streamed: no message outgrows the 4000", async () => {
    // 3,998 as the split measures it (escaped), 4,002 with the closing fence the mrkdwn adds.
    const open = `\`\`\`\n${["<>".repeat(166), "<>".repeat(166), `${"<>".repeat(166)}aaaaaaaa`].join(" ")}`;
    await post(callback(message("C-MD-OPEN", typed(`samefinal ${open}`))));
    await post(callback(message("C-MD-OPEN-STREAM", typed(`stream ${open}`))));
    // What each message shows in the end: its last update, else what was posted.
    const shown = (channel: string) => postsTo(channel).map((p) => updatesIn(channel).filter((u) => u.body.ts === (p.reply!.json as any).ts).at(-1)?.body.text ?? p.body.text);
    for (const channel of ["C-MD-OPEN", "C-MD-OPEN-STREAM"]) {
      await waitFor(() => shown(channel).at(-1)?.endsWith("aaaaaaaa\n```"), 15_000, "the answer's end");
      const bodies = bodiesIn(channel);
      expect(bodies.map((b) => b.text.length).filter((n) => n > 4000)).toEqual([]);
      for (const body of bodies) expect(slackMrkdwnProblem(body.text), body.text).toBeNull();
    }
    expect(updatesIn("C-MD-OPEN-STREAM").length).toBeGreaterThan(0);
  });
});

describe("Slack: files in answers", () => {
  it("uploads an answer's file in Slack's three steps and shares it in the thread, after the text", async () => {
    const threadTs = `${++messageTs}.000100`;
    await post(callback(message("C-FILES", "attach chart.png", { thread_ts: threadTs })));
    // This channel's: an earlier test's answer shared a chart.png too.
    const shared = await waitFor(() => fake.callsTo(/^\/files\.completeUploadExternal$/).find((c) => new URLSearchParams(c.raw).get("channel_id") === "C-FILES"), 15_000, "the shared file");
    const id = JSON.parse(new URLSearchParams(shared.raw).get("files")!)[0].id;
    const asked = fake.callsTo(/^\/files\.getUploadURLExternal$/).find((c) => (c.reply?.json as { file_id?: string } | undefined)?.file_id === id)!;
    expect(Object.fromEntries(new URLSearchParams(asked.raw))).toEqual({ filename: "chart.png", length: String(ANSWER_FILE.length) });
    const [uploaded] = fake.callsTo(new RegExp(`^/upload/${id}$`));
    expect(uploaded.bytes.equals(ANSWER_FILE)).toBe(true);
    expect(uploaded.headers.authorization).toBeUndefined();
    // Streamed from storage with its length declared, not chunked.
    expect(uploaded.headers["content-length"]).toBe(String(ANSWER_FILE.length));
    expect(uploaded.headers["content-type"]).toBe("image/png");
    const fileId = uploaded.path.split("/").pop();
    const completed = Object.fromEntries(new URLSearchParams(shared.raw));
    expect(completed).toMatchObject({ channel_id: "C-FILES", thread_ts: threadTs });
    expect(JSON.parse(completed.files)).toEqual([{ id: fileId, title: "chart.png" }]);
    // The text went first, in the same thread.
    expect(postsTo("C-FILES")[0].body).toMatchObject({ text: "here is chart.png", thread_ts: threadTs });
    expect(postsTo("C-FILES")[0].at).toBeLessThanOrEqual(asked.at);
  });

  it("follows an upload URL's 307 redirect with the file's bytes, as a retried or redirected call streams the file again", async () => {
    await post(callback(message("C-MOVED", "attach moved.png")));
    const shared = await waitFor(
      () => fake.callsTo(/^\/files\.completeUploadExternal$/).find((c) => new URLSearchParams(c.raw).get("channel_id") === "C-MOVED"),
      15_000,
      "the shared file",
    );
    const [asked] = fake.callsTo(/^\/files\.getUploadURLExternal$/).filter((c) => new URLSearchParams(c.raw).get("filename") === "moved.png");
    const id = JSON.parse(new URLSearchParams(shared.raw).get("files")!)[0].id;
    expect(asked.reply?.json).toMatchObject({ file_id: id });
    const [uploaded] = fake.callsTo(new RegExp(`^/upload/${id}$`));
    expect(uploaded.bytes.equals(ANSWER_FILE)).toBe(true);
  });
  it("repeats an upload step that got no answer (nothing is in the channel before the share), and shares the file once", async () => {
    cutAsk.add("cut-ask.pdf");
    cutBytes.add("cut-bytes.pdf");
    for (const name of ["cut-ask.pdf", "cut-bytes.pdf"]) await post(callback(message(`C-CUT-${name}`, `attach ${name}`)));
    for (const name of ["cut-ask.pdf", "cut-bytes.pdf"]) {
      const runId = (await waitFor(() => contextFor(`attach ${name}`)[0], 10_000, "the run")).run_id;
      const outcomes = await waitFor(async () => {
        const files = (await fileRecords(runId)).filter((r) => r.type !== "delivery.attempted");
        return files.some((r) => r.type === "delivery.succeeded" || r.will_retry === false) && files;
      }, 15_000, `${name}'s delivery`);
      expect(outcomes.map((r) => [r.type, r.code ?? null, r.will_retry ?? null])).toEqual([
        ["delivery.failed", "network_error", true],
        ["delivery.succeeded", null, null],
      ]);
      const shares = fake.callsTo(/^\/files\.completeUploadExternal$/).filter((c) => new URLSearchParams(c.raw).get("channel_id") === `C-CUT-${name}`);
      expect(shares).toHaveLength(1);
      // A retry starts again from the first step: a fresh upload URL, the bytes streamed again.
      const asked = fake.callsTo(/^\/files\.getUploadURLExternal$/).filter((c) => new URLSearchParams(c.raw).get("filename") === name);
      expect(asked).toHaveLength(2);
    }
  });
});

describe("Slack: button presses and other interactivity", () => {
  /** A response_url as Slack sends it: it posts in the chat for 30 minutes without a token, so it is a credential. */
  const RESPONSE_URL = "https://hooks.slack.com/actions/T1/5550001/ResponseUrlSecret0123456789";
  let triggers = 0;

  /** Slack's interactivity request: form-encoded, the JSON in `payload`, signed over the raw form body as events are. */
  async function postForm(form: Record<string, string>, opts: { signature?: string; unsigned?: boolean } = {}) {
    const body = new URLSearchParams(form).toString();
    const timestamp = Math.floor(Date.now() / 1000);
    const signed: Record<string, string> = opts.unsigned ? {} : { "x-slack-request-timestamp": String(timestamp), "x-slack-signature": opts.signature ?? sign(timestamp, body) };
    const started = Date.now();
    const res = await fetch(webhookUrl, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded", ...signed }, body });
    const text = await res.text();
    answered.push(text);
    return { status: res.status, text, tookMs: Date.now() - started };
  }
  const interact = (payload: Record<string, unknown>) => postForm({ payload: JSON.stringify(payload) });

  /** A block_actions payload as Slack sends it for a press on a message in `channel` (in `thread`, when given). */
  function press(channel: string, action: Record<string, unknown>, thread?: string) {
    const ts = `${++messageTs}.000300`;
    return {
      type: "block_actions",
      user: { id: "U42", username: "ada", name: "ada", team_id: "T1" },
      api_app_id: "A1",
      token: "legacy-verification-token",
      container: { type: "message", message_ts: ts, channel_id: channel, is_ephemeral: false, ...(thread ? { thread_ts: thread } : {}) },
      trigger_id: `${++triggers}.1234.abcdef`,
      team: { id: "T1", domain: "acme" },
      enterprise: null,
      is_enterprise_install: false,
      channel: { id: channel, name: "general" },
      message: { user: BOT_USER, type: "message", ts, bot_id: "B0BOT", app_id: "A1", text: "Approve?", ...(thread ? { thread_ts: thread } : {}) },
      state: { values: {} },
      response_url: RESPONSE_URL,
      actions: [{ block_id: "b1", action_ts: `${ts}1`, ...action }],
    };
  }
  const rows = (channel: string) =>
    host.query<{ event_type: string; source_event_type: string; data_json: string }>("SELECT event_type, source_event_type, data_json FROM event_log WHERE conversation_id = ? ORDER BY seq", [channel]);

  it("runs a signed button press as a message (a forged or unsigned one is refused): the runner gets its value and who pressed it, the reply goes to the message's thread, Slack gets an empty 200 at once", async () => {
    const thread = `${++messageTs}.000100`;
    const payload = press("C-PRESS", { type: "button", action_id: "approve_btn", text: { type: "plain_text", text: "Approve", emoji: true }, value: "approve", style: "primary" }, thread);
    // Signed with another secret, or not at all: refused before anything is read, so nothing is recorded or run.
    const form = { payload: JSON.stringify(payload) };
    const forged = await postForm(form, { signature: sign(Math.floor(Date.now() / 1000), new URLSearchParams(form).toString(), "another-secret-0123456789") });
    const unsigned = await postForm(form, { unsigned: true });
    expect([forged.status, unsigned.status]).toEqual([401, 401]);
    expect(await rows("C-PRESS")).toEqual([]);
    const res = await interact(payload);
    expect(res).toMatchObject({ status: 200, text: "" });
    expect(res.tookMs).toBeLessThan(3_000);
    const [reply] = await waitFor(() => postsTo("C-PRESS").length > 0 && postsTo("C-PRESS"), 15_000, "the answer to the press");
    expect(reply.body).toEqual({ channel: "C-PRESS", thread_ts: thread, text: "echo: approve" });
    const [ctx] = contextFor("approve");
    expect(ctx.event).toMatchObject({ event_type: "message.received", source: "slack", source_event_type: "block_actions", event_id: `slack:${botId}:interaction:${payload.trigger_id}` });
    expect(ctx.event.data).toEqual({ team_id: "T1", component: { custom_id: "approve_btn", component_type: "button", block_id: "b1", values: ["approve"] }, message_ts: payload.message.ts });
    expect(ctx.conversation).toMatchObject({ conversation_id: "C-PRESS", thread_id: thread, sender_id: "U42" });
    expect(ctx.delivery).toMatchObject({ surface: "slack", reply_target: { channel: "C-PRESS", thread_ts: thread } });
    // The response_url and the legacy token are kept nowhere: not in the stored payload, the record, nor any answer.
    const raw = JSON.parse(new TextDecoder().decode((await host.r2Object(ctx.event.raw_ref))!));
    expect(raw.response_url).toBeUndefined();
    expect(raw.token).toBeUndefined();
    expect(raw.actions[0].value).toBe("approve");
    const stored = await host.query<{ row: string }>("SELECT data_json || metadata_json || COALESCE(input_json, '') AS row FROM event_log");
    for (const text of [...stored.map((r) => r.row), JSON.stringify(raw), ...answered]) expect(text).not.toContain("ResponseUrlSecret");
  });

  it("reads what a select, a user picker and a button without a value chose; a press on a top-level message is answered at top level", async () => {
    await interact(press("C-SELECT", { type: "static_select", action_id: "plan", selected_option: { text: { type: "plain_text", text: "Plan B" }, value: "plan-b" } }));
    await waitFor(() => postsTo("C-SELECT").length > 0, 15_000, "the select's answer");
    expect(postsTo("C-SELECT")[0].body).toEqual({ channel: "C-SELECT", text: "echo: plan-b" });
    expect(contextFor("plan-b")[0].event.data.component).toEqual({ custom_id: "plan", component_type: "static_select", block_id: "b1", values: ["plan-b"] });
    await interact(press("C-PICK", { type: "users_select", action_id: "assignee", selected_user: "U77" }));
    await waitFor(() => postsTo("C-PICK").length > 0, 15_000, "the picker's answer");
    expect(contextFor("@U77")[0].event.data.component.values).toEqual(["U77"]);
    await interact(press("C-LABEL", { type: "button", action_id: "more", text: { type: "plain_text", text: "Show more" } }));
    await waitFor(() => postsTo("C-LABEL").length > 0, 15_000, "the label's answer");
    expect(contextFor("Show more")[0].conversation).toMatchObject({ conversation_id: "C-LABEL", thread_id: null });
  });

  it("never takes a message shortcut's copy of a thread's parent for the parent itself: it is read from Slack, its own author named", async () => {
    const channel = "C-SC-PARENT";
    const parent = { type: "message", user: "U77", text: "the launch plan", ts: `${++messageTs}.000100` };
    threadParents.set(parent.ts, { ...parent, thread_ts: parent.ts });
    // Bo summarises Ann's message, which the bot (app_mention only) never received: recorded under its ts, as Bo's.
    await interact({ type: "message_action", team: { id: "T1" }, user: { id: "U7", username: "bo", team_id: "T1" }, channel: { id: channel }, callback_id: "summarize", trigger_id: `${++triggers}.42.sc`, message_ts: parent.ts, message: parent });
    await waitFor(() => contextFor("the launch plan").length > 0, 15_000, "the shortcut's run");
    await post(callback(message(channel, "<@UBOT> when does it start?", { thread_ts: parent.ts, parent_user_id: "U77" })));
    const [ctx] = await waitFor(() => contextFor("when does it start?").length > 0 && contextFor("when does it start?"), 15_000, "the thread reply's run");
    expect(ctx.event.data.reply_to).toEqual({ message_id: parent.ts, actor: { actor_type: "user", actor_id: "U77", actor_name: null }, text: "the launch plan", quote: null, attachments: [], unavailable: null });
    expect(fake.callsTo(/^\/conversations\.replies$/).filter((c) => new URLSearchParams(c.raw).get("ts") === parent.ts)).toHaveLength(1);
  });

  it("takes a parent the bot delivered and Slack deleted outright (message_deleted of its own post) as deleted, not from the record; a shortcut's copy of it is kept", async () => {
    const channel = "C-SC-OWN-DEL";
    await post(callback(message(channel, "<@UBOT> list the risks")));
    const [answer] = await waitFor(() => postsTo(channel).length > 0 && postsTo(channel));
    const own = { type: "message", user: BOT_USER, bot_id: "B0BOT", app_id: "A1", ts: (answer.reply!.json as { ts: string }).ts, text: "echo: list the risks" };
    await waitFor(async () => (await host.query("SELECT 1 FROM event_log WHERE event_type = 'delivery.succeeded' AND message_ref = ?", [own.ts])).length > 0, 15_000, "the answer recorded");
    // Bo summarises the answer: recorded under its ts, its input a copy of it.
    const trigger = `${++triggers}.42.sc`;
    await interact({ type: "message_action", team: { id: "T1" }, user: { id: "U7", username: "bo", team_id: "T1" }, channel: { id: channel }, callback_id: "summarize", trigger_id: trigger, message_ts: own.ts, message: own });
    await waitFor(() => contextFor(own.text).length > 0, 15_000, "the shortcut's run");
    expect((await post(callback({ type: "message", subtype: "message_deleted", hidden: true, channel, ts: `${++messageTs}.000300`, deleted_ts: own.ts, previous_message: own }))).status).toBe(200);
    threadParents.set(own.ts, { type: "message", subtype: "tombstone", user: "USLACKBOT", hidden: true, text: "This message was deleted.", ts: own.ts, thread_ts: own.ts });
    await post(callback(message(channel, "still there?", { thread_ts: own.ts, parent_user_id: BOT_USER })));
    const [ctx] = await waitFor(() => contextFor("still there?").length > 0 && contextFor("still there?"), 15_000, "the thread reply's run");
    expect(ctx.event.data.reply_to).toMatchObject({ message_id: own.ts, text: null, attachments: [], unavailable: "it was deleted" });
    // The deletion withdrew no one's words: Bo's copy keeps its record and its item.
    const copyId = `slack:${botId}:interaction:${trigger}`;
    expect(await host.query("SELECT json_type(metadata_json, '$.recalled') AS recalled FROM event_log WHERE event_id = ?", [copyId])).toEqual([{ recalled: null }]);
    expect(await host.query("SELECT content FROM transcript WHERE event_id = ? AND role = 'user'", [copyId])).toEqual([{ content: own.text }]);
  });

  it("records a modal's submission, a global shortcut and a press in a modal with an empty 200, running none; an external select's options request is offered none", async () => {
    const before = runner.calls.length;
    const user = { id: "U42", username: "ada", team_id: "T1" };
    const view = { id: "V1", type: "modal", callback_id: "survey", hash: "h1", state: { values: { b: { a: { type: "plain_text_input", value: "typed" } } } } };
    const sent = [
      { type: "view_submission", user, view, trigger_id: "91.1", response_urls: [{ block_id: "b", action_id: "a", channel_id: "C-MODAL", response_url: RESPONSE_URL }] },
      { type: "shortcut", user, callback_id: "open_app", trigger_id: "92.1" },
      { type: "block_actions", user, container: { type: "view", view_id: "V1" }, view, trigger_id: "94.1", actions: [{ type: "button", action_id: "next", value: "2" }] },
    ];
    for (const payload of sent) expect(await interact(payload)).toMatchObject({ status: 200, text: "" });
    const recorded = await host.query<{ event_id: string; event_type: string; source_event_type: string; conversation_id: string | null; raw_ref: string }>(
      "SELECT event_id, event_type, source_event_type, conversation_id, raw_ref FROM event_log WHERE event_id IN (?, ?, ?) ORDER BY seq",
      ["91.1", "92.1", "94.1"].map((t) => `slack:${botId}:interaction:${t}`),
    );
    expect(recorded.map(({ event_type, source_event_type, conversation_id }) => ({ event_type, source_event_type, conversation_id }))).toEqual([
      { event_type: "platform.unhandled", source_event_type: "view_submission", conversation_id: null },
      { event_type: "platform.unhandled", source_event_type: "shortcut", conversation_id: null },
      { event_type: "platform.unhandled", source_event_type: "block_actions.view", conversation_id: null },
    ]);
    for (const { raw_ref } of recorded) {
      const raw = new TextDecoder().decode((await host.r2Object(raw_ref))!);
      expect(raw).not.toContain("ResponseUrlSecret");
      expect(raw).not.toContain("legacy-verification-token");
    }
    // An external select asks for its options as the user types: answered at once with none, and not recorded.
    const suggestion = await interact({ type: "block_suggestion", user, action_id: "search", block_id: "b", value: "ad", trigger_id: "96.1" });
    expect(suggestion).toMatchObject({ status: 200 });
    expect(JSON.parse(suggestion.text)).toEqual({ options: [] });
    expect(await host.query("SELECT 1 FROM event_log WHERE event_id = ?", [`slack:${botId}:interaction:96.1`])).toEqual([]);
    expect(runner.calls.length).toBe(before);
  });
});
