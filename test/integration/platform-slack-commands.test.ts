import { createHmac } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { longText, startChatRunner, startFakePlatform, waitFor, type FakeReply, type PlatformCall } from "../support/fake-platform";
import { SLACK_AUTH_TEST } from "../support/slack-events";

/**
 * Slack slash commands and message shortcuts run as Discord's commands do (README, Chat platforms): signed form posts
 * in, the answer by chat.postMessage, or by the command's response_url where Slack says the bot may not post.
 */
const BOT_TOKEN = "xoxb-TEST-slack-commands-token-1234567890";
const SIGNING_SECRET = "slack-commands-signing-secret-0123456789";
/** What every response_url of this file holds: it posts in the chat without a token, so it must be kept nowhere. */
const URL_SECRET = "ResponseUrlSecret";

let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startChatRunner>>;
/** A bot with an agent, one with none, and one paused (its agent bound). */
const bots: Record<"bound" | "unbound" | "paused", { botId: string; webhookUrl: string }> = {} as never;
const answered: string[] = [];
let ts = 1_700_000_000;

/** Posts each response_url took: Slack takes five, then answers `used_url`. */
const urlPosts = new Map<string, number>();

function slackApi(call: PlatformCall): FakeReply {
  // Who the bot token is (its workspace T1, as the envelopes say): the host checks every request against it.
  if (call.path === "/auth.test") return { json: SLACK_AUTH_TEST };
  // A response_url: Slack's own hook, no token asked.
  if (call.path.startsWith("/commands/") || call.path.startsWith("/actions/")) {
    if (call.headers.authorization) return { status: 400, json: { ok: false, error: "invalid_auth" } };
    const n = (urlPosts.get(call.path) ?? 0) + 1;
    urlPosts.set(call.path, n);
    return n > 5 ? { status: 404, json: { ok: false, error: "used_url" } } : { json: { ok: true } };
  }
  if (call.headers.authorization !== `Bearer ${BOT_TOKEN}`) return { json: { ok: false, error: "invalid_auth" } };
  if (call.path === "/chat.postMessage") {
    // A channel the bot was never invited to; a DM between people, which the bot cannot see.
    if (String(call.body.channel).startsWith("C-OUT")) return { json: { ok: false, error: "not_in_channel" } };
    if (String(call.body.channel).startsWith("D-PEOPLE")) return { json: { ok: false, error: "channel_not_found" } };
    return { json: { ok: true, channel: call.body.channel, ts: `${++ts}.000100` } };
  }
  if (call.path === "/chat.update") return { json: { ok: true, channel: call.body.channel, ts: call.body.ts } };
  return { status: 404, json: { ok: false, error: "unknown_method" } };
}

beforeAll(async () => {
  fake = await startFakePlatform(slackApi);
  runner = await startChatRunner("slack-commands");
  host = await startTestHost({ captureLogs: true });
  for (const name of ["bound", "unbound", "paused"] as const) {
    const created = await host.admin("POST", "/v1/admin/bots", { platform: "slack", workspace_id: "acme", api_base_url: fake.url, enabled: name !== "paused", credentials: { bot_token: BOT_TOKEN, signing_secret: SIGNING_SECRET } });
    expect(created.status).toBe(201);
    bots[name] = { botId: created.body.bot_id, webhookUrl: created.body.webhook_url };
    if (name !== "unbound") await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: `slack-commands-${name}`, scope: { type: "bot", id: created.body.bot_id } });
  }
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

const sign = (timestamp: number, body: string) => `v0=${createHmac("sha256", SIGNING_SECRET).update(`v0:${timestamp}:${body}`).digest("hex")}`;

/** A signed form post, as Slack sends slash commands and interactivity payloads. */
async function postForm(form: Record<string, string>, bot: keyof typeof bots = "bound") {
  const body = new URLSearchParams(form).toString();
  const timestamp = Math.floor(Date.now() / 1000);
  const started = Date.now();
  const res = await fetch(bots[bot].webhookUrl, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded", "x-slack-request-timestamp": String(timestamp), "x-slack-signature": sign(timestamp, body) }, body });
  const text = await res.text();
  answered.push(text);
  return { status: res.status, text, tookMs: Date.now() - started };
}

let triggers = 0;
const responseUrl = (kind: "commands" | "actions") => `${fake.url}/${kind}/T1/${++triggers}/${URL_SECRET}${triggers}`;
/** A slash command as Slack posts it: form fields of its own. */
function slash(channel: string, command: string, text: string, opts: { url?: string; bot?: keyof typeof bots } = {}) {
  const fields = {
    token: "legacy-verification-token",
    team_id: "T1",
    team_domain: "acme",
    channel_id: channel,
    channel_name: "general",
    user_id: "U42",
    user_name: "ada",
    command,
    text,
    api_app_id: "A1",
    is_enterprise_install: "false",
    response_url: opts.url ?? responseUrl("commands"),
    trigger_id: `${++triggers}.42.cmd`,
  };
  return { fields, res: postForm(fields, opts.bot) };
}
const interact = (payload: Record<string, unknown>, bot: keyof typeof bots = "bound") => postForm({ payload: JSON.stringify(payload) }, bot);
const user = { id: "U42", username: "ada", name: "ada", team_id: "T1" };
function shortcut(channel: string, message: Record<string, unknown>, url = responseUrl("actions")) {
  return { type: "message_action", token: "legacy-verification-token", action_ts: "1.2", team: { id: "T1", domain: "acme" }, user, channel: { id: channel, name: "general" }, is_enterprise_install: false, callback_id: "summarize_msg", trigger_id: `${++triggers}.42.sc`, message_ts: message.ts, message, response_url: url };
}
function press(channel: string, url: string) {
  const messageTs = `${++ts}.000300`;
  return {
    type: "block_actions",
    user,
    token: "legacy-verification-token",
    container: { type: "message", message_ts: messageTs, channel_id: channel, is_ephemeral: false },
    trigger_id: `${++triggers}.42.press`,
    team: { id: "T1", domain: "acme" },
    channel: { id: channel, name: "general" },
    message: { type: "message", ts: messageTs, text: "Approve?" },
    response_url: url,
    actions: [{ type: "button", action_id: "approve", block_id: "b1", value: "approve" }],
  };
}

const postsTo = (channel: string) => fake.callsTo(/^\/chat\.postMessage$/).filter((c) => c.body.channel === channel);
const callsTo = (url: string) => fake.calls.filter((c) => `${fake.url}${c.path}` === url);
const contextFor = (text: string) => runner.contexts.filter((c) => c.input.text === text);
async function trail(runId: string) {
  const rows = await host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type IN ('delivery.succeeded', 'delivery.failed') ORDER BY seq", [runId]);
  return rows.map((r) => ({ type: r.event_type, ...JSON.parse(r.data_json) }));
}

describe("Slack slash commands and message shortcuts", () => {
  it("runs `/ask what is X` as a message reading `what is X` (`/ask` alone reads `/ask`), shows the command in the channel at once, and answers there", async () => {
    const { fields, res } = slash("C-CMD", "/ask", "what is X");
    const ack = await res;
    expect(ack.status).toBe(200);
    expect(JSON.parse(ack.text)).toEqual({ response_type: "in_channel" });
    expect(ack.tookMs).toBeLessThan(3_000);
    const [reply] = await waitFor(() => postsTo("C-CMD").length > 0 && postsTo("C-CMD"), 15_000, "the command's answer");
    expect(reply.body).toEqual({ channel: "C-CMD", text: "echo: what is X" });
    const [ctx] = contextFor("what is X");
    expect(ctx.event).toMatchObject({ event_type: "message.received", source: "slack", source_event_type: "slash_command", event_id: `slack:${bots.bound.botId}:interaction:${fields.trigger_id}` });
    expect(ctx.event.data).toEqual({ team_id: "T1", channel_name: "general", command: { name: "ask" }, raw_text: "what is X" });
    expect(ctx.conversation).toMatchObject({ conversation_id: "C-CMD", thread_id: null, sender_id: "U42" });
    expect(ctx.delivery.reply_target).toEqual({ channel: "C-CMD", thread_ts: null });
    // Its markup read as words, as a message's is; nothing typed after the command reads as the command.
    await slash("C-CMD2", "/ask", "ping <@U7|bob> in <#C9|general>").res;
    await slash("C-CMD3", "/ask", "  ").res;
    await waitFor(() => postsTo("C-CMD2").length > 0 && postsTo("C-CMD3").length > 0, 15_000, "the other commands' answers");
    expect(postsTo("C-CMD2")[0].body.text).toBe("echo: ping @bob in #general");
    expect(postsTo("C-CMD3")[0].body.text).toBe("echo: /ask");
  });

  it("answers by the command's response_url, in the channel, where the bot may not post (not_in_channel, or a DM between people): a streamed draft stops, the text goes whole, no failure is noted on the bot", async () => {
    const streamed = slash("C-OUT-1", "/ask", "stream one two three");
    expect(JSON.parse((await streamed.res).text)).toEqual({ response_type: "in_channel" });
    const [viaUrl] = await waitFor(() => callsTo(streamed.fields.response_url).length > 0 && callsTo(streamed.fields.response_url), 15_000, "the answer by response_url");
    expect(viaUrl.body).toEqual({ response_type: "in_channel", text: "one two three", replace_original: false });
    expect(viaUrl.headers.authorization).toBeUndefined();
    const runId = contextFor("stream one two three")[0].run_id;
    await host.waitForRun(runId);
    const records = await waitFor(async () => ((await trail(runId)).some((r) => r.type === "delivery.succeeded") ? trail(runId) : false), 15_000, "the trail");
    expect(records.map((r) => [r.type, r.operation, r.code ?? null, r.continues_as ?? null, r.message_id ?? null])).toEqual([
      ["delivery.failed", "send", "slack_not_in_channel", "response_url", null],
      ["delivery.succeeded", "send", null, null, "response_url:1"],
    ]);
    expect(fake.callsTo(/^\/chat\.update$/).filter((c) => c.body.channel === "C-OUT-1")).toEqual([]);
    expect(callsTo(streamed.fields.response_url)).toHaveLength(1);

    // A final text of two parts, streamed in chunks past the first: each part posted once by the URL, in order, the
    // whole text and nothing twice (the runner was told it could stream: nothing knew the channel would refuse).
    const long = slash("C-OUT-2", "/ask", "bigstream 2 3000");
    await long.res;
    const longRun = await waitFor(() => contextFor("bigstream 2 3000")[0]?.run_id, 15_000, "the long answer's run");
    expect(contextFor("bigstream 2 3000")[0].delivery).toMatchObject({ supports_streaming: true, supports_edit: true });
    await host.waitForRun(longRun);
    const longTrail = await waitFor(async () => ((await trail(longRun)).filter((r) => r.type === "delivery.succeeded").length >= 2 ? trail(longRun) : false), 15_000, "the long answer's trail");
    expect(longTrail.map((r) => [r.type, r.operation, r.code ?? null, r.continues_as ?? null, r.message_id ?? null])).toEqual([
      ["delivery.failed", "send", "slack_not_in_channel", "response_url", null],
      ["delivery.succeeded", "send", null, null, "response_url:1"],
      ["delivery.succeeded", "send", null, null, "response_url:2"],
    ]);
    const longPosts = callsTo(long.fields.response_url).map((c) => c.body);
    expect(longPosts.map((b) => [b.response_type, b.replace_original])).toEqual([["in_channel", false], ["in_channel", false]]);
    const final = [1, 2].map((i) => longText(3000).replace(/^line 1 /, `chunk ${i} `)).join("");
    const words = (text: string) => text.split(/\s+/).filter(Boolean);
    expect(words(longPosts.map((b) => b.text).join("\n"))).toEqual(words(final));
    expect(fake.callsTo(/^\/chat\.update$/).filter((c) => c.body.channel === "C-OUT-2")).toEqual([]);

    const dm = slash("D-PEOPLE-1", "/ask", "hello there");
    await dm.res;
    const [inDm] = await waitFor(() => callsTo(dm.fields.response_url).length > 0 && callsTo(dm.fields.response_url), 15_000, "the DM's answer");
    expect(inDm.body).toEqual({ response_type: "in_channel", text: "echo: hello there", replace_original: false });
    expect(postsTo("D-PEOPLE-1")).toHaveLength(1);
    const dmRun = contextFor("hello there")[0].run_id;
    await host.waitForRun(dmRun);
    expect((await trail(dmRun)).map((r) => [r.type, r.message_id ?? null])).toEqual([["delivery.succeeded", "response_url:1"]]);
    const view = await host.admin("GET", `/v1/admin/bots/${bots.bound.botId}`);
    expect(view.body.last_delivery_failure).toBeUndefined();
  });

  it("answers a long command by its response_url in at most the five posts Slack takes, the last saying the rest was cut, streamed or not", async () => {
    // `long`: one final message, whose first part finds the channel refused; `bigstream`: a draft refused first.
    for (const [text, refusals] of [["long 30000", []], ["bigstream 8 3000", [["slack_not_in_channel", "response_url"]]]] as const) {
      const cmd = slash("C-OUT-5", "/ask", text);
      await cmd.res;
      const runId = await waitFor(() => contextFor(text)[0]?.run_id, 15_000, `the run of ${text}`);
      await host.waitForRun(runId);
      await waitFor(async () => (await trail(runId)).filter((r) => r.type === "delivery.succeeded").length >= 5, 15_000, "five posts");
      // Nothing more comes: no sixth post for Slack to refuse.
      await new Promise((r) => setTimeout(r, 1_000));
      const posts = callsTo(cmd.fields.response_url).map((c) => String(c.body.text));
      expect(posts).toHaveLength(5);
      expect(posts[4]).toBe("(The answer goes on, but is too long for this chat: the rest was cut.)");
      const answer = longText(3000).replace(/^line 1 /, "chunk 1 ");
      expect(posts[0].startsWith(text.startsWith("long") ? "line 1 " : answer.slice(0, 100))).toBe(true);
      const records = await trail(runId);
      expect(records.filter((r) => r.type === "delivery.failed").map((r) => [r.code, r.continues_as ?? null])).toEqual(refusals);
      expect(records.filter((r) => r.type === "delivery.succeeded").map((r) => r.message_id)).toEqual([1, 2, 3, 4, 5].map((i) => `response_url:${i}`));
    }
  });

  it("sends nothing to a response_url that is not Slack's (nor the bot's API origin): the refusal stands", async () => {
    const forged = slash("C-OUT-2", "/ask", "elsewhere", { url: `https://hooks.example.invalid/commands/${URL_SECRET}` });
    await forged.res;
    const runId = (await waitFor(() => contextFor("elsewhere")[0], 15_000, "the run")).run_id;
    const records = await waitFor(async () => ((await trail(runId)).some((r) => r.will_retry === false) ? trail(runId) : false), 15_000, "the refusal");
    expect(records.map((r) => [r.type, r.code, r.continues_as ?? null])).toEqual([["delivery.failed", "slack_not_in_channel", null]]);
  });

  it("runs a message shortcut on the message it was used on (its words; the shortcut's id when it has none), answered in its thread", async () => {
    const parent = `${++ts}.000100`;
    const message = { type: "message", user: "U7", ts: `${++ts}.000200`, thread_ts: parent, text: "see <https://example.com/a|the doc> &amp; more" };
    const payload = shortcut("C-SC", message);
    expect(await interact(payload)).toMatchObject({ status: 200, text: "" });
    const [reply] = await waitFor(() => postsTo("C-SC").length > 0 && postsTo("C-SC"), 15_000, "the shortcut's answer");
    expect(reply.body).toEqual({ channel: "C-SC", thread_ts: parent, text: "echo: see the doc (https://example.com/a) &amp; more" });
    const [ctx] = contextFor("see the doc (https://example.com/a) & more");
    expect(ctx.event).toMatchObject({ source_event_type: "message_action", event_id: `slack:${bots.bound.botId}:interaction:${payload.trigger_id}` });
    expect(ctx.event.data).toEqual({ team_id: "T1", command: { name: "summarize_msg", target: { type: "message", id: message.ts, content: message.text, author_id: "U7" } }, message_ts: message.ts });
    expect(ctx.conversation).toMatchObject({ conversation_id: "C-SC", thread_id: parent, sender_id: "U42" });
    await interact(shortcut("C-SC2", { type: "message", user: "U7", ts: `${++ts}.000200`, text: "" }));
    await waitFor(() => postsTo("C-SC2").length > 0, 15_000, "the wordless message's answer");
    expect(postsTo("C-SC2")[0].body).toEqual({ channel: "C-SC2", text: "echo: summarize_msg" });
  });

  it("tells the user privately at once when nothing will answer: a command in its acknowledgement, a press or shortcut by its response_url (a paused bot calls nothing)", async () => {
    const before = runner.contexts.length;
    expect(JSON.parse((await slash("C-NONE", "/ask", "anyone?", { bot: "unbound" }).res).text)).toEqual({ response_type: "ephemeral", text: "No agent answers here." });
    expect(JSON.parse((await slash("C-PAUSED", "/ask", "anyone?", { bot: "paused" }).res).text)).toEqual({ response_type: "ephemeral", text: "This app is paused; try again later." });
    const pausedUrl = responseUrl("actions");
    expect(await interact(press("C-PAUSED", pausedUrl), "paused")).toMatchObject({ status: 200, text: "" });
    for (const payload of [press("C-NONE", responseUrl("actions")), shortcut("C-NONE", { type: "message", user: "U7", ts: `${++ts}.000200`, text: "hi" })]) {
      expect(await interact(payload, "unbound")).toMatchObject({ status: 200, text: "" });
      const [notice] = await waitFor(() => callsTo(payload.response_url).length > 0 && callsTo(payload.response_url), 10_000, `the ${payload.type} notice`);
      expect(notice.body).toEqual({ response_type: "ephemeral", text: "No agent answers here.", replace_original: false });
    }
    expect(callsTo(pausedUrl)).toEqual([]);
    expect(runner.contexts.length).toBe(before);
  });

  it("answers a button pressed twice in quick succession once: the second press hears by its response_url that the first is being answered", async () => {
    const first = press("C-TWICE", responseUrl("actions"));
    const second = { ...first, trigger_id: `${++triggers}.42.press`, response_url: responseUrl("actions") };
    expect((await Promise.all([interact(first), interact(second)])).map((a) => [a.status, a.text])).toEqual([[200, ""], [200, ""]]);
    const [notice] = await waitFor(() => [first, second].flatMap((p) => callsTo(p.response_url)).length > 0 && [first, second].flatMap((p) => callsTo(p.response_url)), 10_000, "the repeated press's notice");
    expect(notice.body).toEqual({ response_type: "ephemeral", text: "Already answering your earlier press of this button.", replace_original: false });
    await waitFor(() => postsTo("C-TWICE").length > 0, 10_000, "the press's answer");
    await new Promise((r) => setTimeout(r, 300));
    expect(postsTo("C-TWICE").map((p) => p.body.text)).toEqual(["echo: approve"]);
    expect([first, second].flatMap((p) => callsTo(p.response_url))).toHaveLength(1);
    expect(contextFor("approve").filter((c) => c.conversation.conversation_id === "C-TWICE")).toHaveLength(1);
  });

  it("keeps no response_url it used: not in records, stored payloads, what the runner got, answers or logs", async () => {
    // The host had them in hand: it answered and gave notices by them.
    expect(fake.calls.filter((c) => c.path.includes(URL_SECRET)).length).toBeGreaterThanOrEqual(4);
    const rows = await host.query<Record<string, unknown>>("SELECT * FROM event_log");
    const raws: string[] = [];
    for (const ref of new Set(rows.map((r) => r.raw_ref).filter((r): r is string => typeof r === "string"))) raws.push(new TextDecoder().decode((await host.r2Object(ref))!));
    expect(raws.some((r) => r.includes('"command":"/ask"'))).toBe(true);
    expect(raws.some((r) => r.includes('"type":"message_action"'))).toBe(true);
    for (const text of [...rows.map((r) => JSON.stringify(r)), ...raws, ...runner.contexts.map((c) => JSON.stringify(c)), ...answered, host.logs()]) expect(text).not.toContain(URL_SECRET);
  });
});
