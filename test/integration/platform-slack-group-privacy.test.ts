import { createHmac } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakePlatform, waitFor, type FakeReply, type PlatformCall } from "../support/fake-platform";
import { callHostApi, deferred } from "../support/host-api";
import { readConversation, type ConversationReads } from "../support/conversation-reads";
import { namedLogLines, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { putAgent } from "../support/scripted-runner";
import { SLACK_AUTH_TEST } from "../support/slack-events";

/**
 * Several users in one Slack channel share its conversation; a press on an ephemeral message is its user's alone
 * (README "Who sees what in a group chat"). Through the real signed form path: such a press is answered to that user
 * only (its response_url as `ephemeral`, else chat.postEphemeral; never chat.postMessage), it is never pulled by
 * another user's public run nor pulls a public message into its own, and runs answering anyone else read nothing of it.
 */
const BOT_TOKEN = "xoxb-TEST-slack-privacy-token-1234567890";
const SIGNING_SECRET = "slack-privacy-signing-secret-0123456789";
let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
let bot: { botId: string; webhookUrl: string };
const gates = new Map<string, ReturnType<typeof deferred<void>>>();
const gate = (tag: string) => gates.get(tag) ?? gates.set(tag, deferred()).get(tag)!;
/** Each run as its runner began it, and what a `read` run found, by run id. */
const begun: { runId: string; eventId: string; text: string; metadata: Record<string, unknown>; delivery: Record<string, unknown>; historyBefore: boolean }[] = [];
const reads = new Map<string, ConversationReads>();
let ts = 1_700_000_000;

function slackApi(call: PlatformCall): FakeReply {
  // Who the bot token is (its workspace T1, as the envelopes say): the host checks every request against it.
  if (call.path === "/auth.test") return { json: SLACK_AUTH_TEST };
  // A response_url: Slack's own hook, no token asked; one whose five posts are spent says so.
  if (call.path.startsWith("/actions/") || call.path.startsWith("/commands/")) return call.path.includes("SPENT") ? { status: 404, json: { ok: false, error: "used_url" } } : { json: { ok: true } };
  if (call.headers.authorization !== `Bearer ${BOT_TOKEN}`) return { json: { ok: false, error: "invalid_auth" } };
  if (call.path === "/chat.postMessage" || call.path === "/chat.postEphemeral") return { json: { ok: true, channel: call.body.channel, ...(call.path === "/chat.postMessage" ? { ts: `${++ts}.000100` } : { message_ts: `${++ts}.000200` }) } };
  if (call.path === "/chat.update") return { json: { ok: true, channel: call.body.channel, ts: call.body.ts } };
  return { status: 404, json: { ok: false, error: "unknown_method" } };
}

beforeAll(async () => {
  fake = await startFakePlatform(slackApi);
  runner = await startAdHocRunner({
    name: "slack-group",
    runners: [{ name: "default", label: { en_US: "g" }, capabilities: { streaming: true, steering: true }, permissions: { history: ["page", "search"], events: ["get", "page"] } }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const text = String(ctx.input.text ?? "");
      const api = (action: string, params: Record<string, unknown> = {}) => callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, action, params);
      begun.push({ runId: ctx.run_id, eventId: ctx.event.event_id, text, metadata: ctx.metadata, delivery: ctx.delivery, historyBefore: ctx.context.has_history_before });
      const w = resultWriter(res, ctx.run_id);
      if (text.startsWith("read ")) {
        reads.set(ctx.run_id, await readConversation(ctx, text.slice("read ".length)));
        return w.reply("read");
      }
      if (text.startsWith("stream ")) {
        // Deltas a while apart, as a model writes: a surface that edits would show a growing draft.
        const words = text.slice("stream ".length).split(" ");
        for (const [i, word] of words.entries()) {
          w.send("message.delta", { chunk: { role: "assistant", content: i ? ` ${word}` : word } });
          await new Promise((r) => setTimeout(r, 300));
        }
        return w.reply(words.join(" "));
      }
      if (text.startsWith("attach ")) {
        w.send("artifact.created", { artifact_type: "file", mime_type: "text/plain", name: text.slice("attach ".length), content_base64: Buffer.from("private notes").toString("base64") });
        return w.reply(`here is ${text.slice("attach ".length)}`);
      }
      if (text.startsWith("hold ")) await gate(text.slice("hold ".length)).promise;
      const pulled = ctx.context.available_apis.steering_pull ? (await api("steering.pull", { mode: "all" })).body.data.items.map((i: any) => i.input.text) : [];
      w.reply(`re: ${[text, ...pulled].join(" + ")}`);
    },
  });
  host = await startTestHost({ captureLogs: true });
  const created = await host.admin("POST", "/v1/admin/bots", { platform: "slack", workspace_id: "acme", api_base_url: fake.url, credentials: { bot_token: BOT_TOKEN, signing_secret: SIGNING_SECRET } });
  expect(created.status).toBe(201);
  bot = { botId: created.body.bot_id, webhookUrl: created.body.webhook_url };
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "slack-group", scope: { type: "bot", id: bot.botId } });
  await putAgent(host, { agent_id: "slack-group", runner_id: runner.runnerId(), scope: { type: "bot", id: bot.botId } });
});
afterAll(async () => {
  for (const g of gates.values()) g.resolve();
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

/** A signed form post, as Slack sends interactivity payloads and slash commands; answers Slack's acknowledgement. */
async function postForm(form: Record<string, string>) {
  const body = new URLSearchParams(form).toString();
  const timestamp = Math.floor(Date.now() / 1000);
  const signature = `v0=${createHmac("sha256", SIGNING_SECRET).update(`v0:${timestamp}:${body}`).digest("hex")}`;
  const res = await fetch(bot.webhookUrl, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded", "x-slack-request-timestamp": String(timestamp), "x-slack-signature": signature }, body });
  expect(res.status).toBe(200);
  return res.text();
}

let triggers = 0;
/**
 * A button press in `channel` by `user` whose value is `text`: on a message everyone sees, or (`ephemeral`) on one only
 * that user sees, which Slack sends with no `message`. `spent`: its response_url takes no more posts.
 */
function press(channel: string, user: string, text: string, opts: { ephemeral?: boolean; thread?: string; spent?: boolean } = {}) {
  const trigger = `${++triggers}.77.press`;
  const messageTs = `${++ts}.000300`;
  const payload = {
    type: "block_actions",
    user: { id: user, username: user.toLowerCase(), team_id: "T1" },
    container: { type: "message", message_ts: messageTs, channel_id: channel, is_ephemeral: opts.ephemeral === true, ...(opts.thread ? { thread_ts: opts.thread } : {}) },
    trigger_id: trigger,
    team: { id: "T1" },
    channel: { id: channel, name: "general" },
    ...(opts.ephemeral ? {} : { message: { type: "message", ts: messageTs, text: "Pick one" } }),
    response_url: `${fake.url}/actions/T1/${triggers}/${opts.spent ? "SPENT" : "fresh"}`,
    actions: [{ type: "button", action_id: "pick", block_id: "b1", value: text }],
  };
  return { payload, eventId: `slack:${bot.botId}:interaction:${trigger}`, ack: () => postForm({ payload: JSON.stringify(payload) }) };
}
/** A slash command `/ask {text}` in `channel` by `user`: shown in the channel, answered publicly. */
function slash(channel: string, user: string, text: string) {
  const trigger = `${++triggers}.77.cmd`;
  const fields = { team_id: "T1", channel_id: channel, channel_name: "general", user_id: user, user_name: user.toLowerCase(), command: "/ask", text, response_url: `${fake.url}/commands/T1/${triggers}/fresh`, trigger_id: trigger };
  return { payload: fields, eventId: `slack:${bot.botId}:interaction:${trigger}`, ack: () => postForm(fields) };
}
type Interaction = ReturnType<typeof press>;

const runOf = (i: { eventId: string }) => waitFor(() => begun.find((b) => b.eventId === i.eventId)?.runId, 10_000, `the run of ${i.eventId}`);
/** What went to an interaction's own response_url (its answer, or a notice). */
const byUrl = (i: { payload: { response_url: string } }) => fake.calls.filter((c) => `${fake.url}${c.path}` === i.payload.response_url).map((c) => c.body);
const publicPosts = (channel: string) => fake.calls.filter((c) => (c.path === "/chat.postMessage" || c.path === "/chat.update") && c.body.channel === channel).map((c) => c.body.text);
const privateAnswer = (i: Interaction) => waitFor(() => byUrl(i).find((b) => String(b.text).startsWith("re: "))?.text, 15_000, `the private answer to ${i.eventId}`);
const publicAnswer = (channel: string, text: string) => waitFor(() => publicPosts(channel).includes(text), 15_000, `"${text}" in ${channel}`);
const ADDED = "Added to the answer in progress.";

async function trail(runId: string) {
  const rows = await host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type IN ('delivery.succeeded', 'delivery.failed') ORDER BY seq", [runId]);
  return rows.map((r) => ({ type: r.event_type, ...JSON.parse(r.data_json) }));
}

/** What a run of `user`'s press in `channel` read of the conversation, and of the event `eventId`. */
async function readAs(channel: string, user: string, eventId: string, ephemeral: boolean) {
  const i = press(channel, user, `read ${eventId}`, { ephemeral });
  await i.ack();
  const runId = await runOf(i);
  await host.waitForRun(runId);
  const run = begun.find((b) => b.runId === runId)!;
  return { ...reads.get(runId)!, audience: run.metadata.private_audience, historyBefore: run.historyBefore };
}

describe("Slack: one channel, several users, some presses private", () => {
  it("answers a press on an ephemeral message to its presser alone: by its response_url as ephemeral, whole (no draft), never in the channel; past a spent response_url by chat.postEphemeral in the thread; no file shared (0 bytes told, not the bot's failure)", async () => {
    const c = "C-PRIV";
    const streamed = press(c, "U-BOB", "stream my hidden plan", { ephemeral: true });
    expect(await streamed.ack()).toBe("");
    await waitFor(() => byUrl(streamed).length > 0, 15_000, "the private answer");
    const runId = await runOf(streamed);
    await host.waitForRun(runId);
    await waitFor(async () => (await trail(runId)).length > 0, 15_000, "the trail");
    expect(byUrl(streamed)).toEqual([{ response_type: "ephemeral", text: "my hidden plan", replace_original: false }]);
    expect(fake.calls.filter((call) => JSON.stringify(call.body ?? {}).includes("hidden")).map((call) => call.path)).toEqual([new URL(streamed.payload.response_url).pathname]);
    const run = begun.find((b) => b.runId === runId)!;
    const files = (run.delivery.platform_capabilities as { files?: unknown }).files;
    expect({ audience: run.metadata.private_audience, streaming: run.delivery.supports_streaming, edit: run.delivery.supports_edit, files }).toEqual({ audience: "slack_ephemeral:U-BOB", streaming: false, edit: false, files: { max_bytes: 0 } });
    expect((await trail(runId)).map((r) => [r.type, r.operation, r.message_id ?? null])).toEqual([["delivery.succeeded", "send", "response_url:1"]]);
    const [row] = await host.query<{ metadata_json: string }>("SELECT metadata_json FROM event_log WHERE event_id = ?", [streamed.eventId]);
    expect(JSON.parse(row.metadata_json)).toMatchObject({ private_audience: "slack_ephemeral:U-BOB" });

    // Its response_url spent (or expired): the answer still goes to Bob alone, in the thread the press was in.
    const spent = press(c, "U-BOB", "hello privately", { ephemeral: true, thread: "1699999999.000100", spent: true });
    await spent.ack();
    const [ephemeral] = await waitFor(() => fake.callsTo(/^\/chat\.postEphemeral$/).length > 0 && fake.callsTo(/^\/chat\.postEphemeral$/), 15_000, "chat.postEphemeral");
    expect(ephemeral.body).toEqual({ channel: c, user: "U-BOB", text: "re: hello privately", thread_ts: "1699999999.000100" });
    expect(byUrl(spent)).toHaveLength(1);

    // A file would be shared with the whole channel: its text answers, the file is recorded as not sent, past the 0
    // bytes the runner was told: no failure of the bot's (not noted on it, not logged as given up).
    const attach = press(c, "U-BOB", "attach notes.txt", { ephemeral: true });
    await attach.ack();
    await waitFor(() => byUrl(attach).length > 0, 15_000, "the answer with a file");
    const attachRun = await runOf(attach);
    const records = await waitFor(async () => ((await trail(attachRun)).length >= 2 ? trail(attachRun) : false), 15_000, "the file's record");
    expect(records.map((r) => [r.type, r.operation, r.code ?? null])).toEqual([
      ["delivery.succeeded", "send", null],
      ["delivery.failed", "send_file", "file_too_large"],
    ]);
    expect(byUrl(attach)).toEqual([{ response_type: "ephemeral", text: "here is notes.txt", replace_original: false }]);
    expect(fake.calls.filter((call) => call.path.startsWith("/files."))).toEqual([]);
    expect(publicPosts(c)).toEqual([]);
    await host.waitForRun(attachRun);
    expect((await host.admin("GET", `/v1/admin/bots/${bot.botId}`)).body.last_delivery_failure).toBeUndefined();
    expect(namedLogLines(host.logs(), "delivery.failed").filter((line) => line.run_id === attachRun)).toEqual([]);
  });

  it("a private press is never pulled by another user's public run, nor a public message by a private run: each has its own run, answered for its own eyes; same eyes still steer", async () => {
    const c = "C-STEER";
    const ada = press(c, "U-ADA", "hold ada");
    await ada.ack();
    await runOf(ada);
    // Bob's private press, while Ada's public run is busy: not added to her answer, which the whole channel sees.
    const bob = press(c, "U-BOB", "secret plan", { ephemeral: true });
    expect(await bob.ack()).toBe("");
    // Cara's public command still joins Ada's public answer.
    const cara = slash(c, "U-CARA", "public follow-up");
    expect(JSON.parse(await cara.ack())).toEqual({ response_type: "ephemeral", text: ADDED });
    gate("ada").resolve();
    await publicAnswer(c, "re: hold ada + public follow-up");
    expect(await privateAnswer(bob)).toBe("re: secret plan");
    // A run of its own (no "Added to the answer in progress." for it), answered to Bob alone.
    expect(byUrl(bob)).toEqual([{ response_type: "ephemeral", text: "re: secret plan", replace_original: false }]);
    expect(fake.calls.filter((call) => JSON.stringify(call.body ?? {}).includes("secret")).every((call) => `${fake.url}${call.path}` === bob.payload.response_url)).toBe(true);

    // The other way round: Bob's private run busy, Ada's public press is not pulled into it; Bob's own next press is.
    const bobHeld = press(c, "U-BOB", "hold bob", { ephemeral: true });
    await bobHeld.ack();
    await runOf(bobHeld);
    const adaAgain = press(c, "U-ADA", "after the private one");
    await adaAgain.ack();
    const bobMore = press(c, "U-BOB", "more secrets", { ephemeral: true });
    await bobMore.ack();
    await waitFor(() => byUrl(bobMore).length > 0, 10_000, "the steered notice");
    expect(byUrl(bobMore)).toEqual([{ response_type: "ephemeral", text: ADDED, replace_original: false }]);
    gate("bob").resolve();
    expect(await privateAnswer(bobHeld)).toBe("re: hold bob + more secrets");
    await publicAnswer(c, "re: after the private one");
    expect(byUrl(adaAgain)).toEqual([]);
  });

  it("a run answering others reads nothing of a private press (history.page, history.search, event.page, event.get, nor has_history_before); its own user's private run does", async () => {
    const c = "C-READ";
    const secret = press(c, "U-BOB", "secret recipe", { ephemeral: true });
    await secret.ack();
    expect(await privateAnswer(secret)).toBe("re: secret recipe");
    const secretRun = await runOf(secret);
    await host.waitForRun(secretRun);
    const said = (r: { history: string[]; search: string[] }) => [...r.history, ...r.search].filter((t) => t.includes("secret"));
    const names = (events: any[]) => events.filter((e) => e.event_id === secret.eventId || JSON.stringify(e.metadata).includes(secretRun) || String(e.input_summary ?? "").includes("secret"));

    // Ada's public run, and Dan's private one (another user's eyes), read none of it. Ada's comes first: all before it
    // is Bob's, so it has no history before its event; Dan's has Ada's.
    for (const [user, ephemeral] of [["U-ADA", false], ["U-DAN", true]] as const) {
      const seen = await readAs(c, user, secret.eventId, ephemeral);
      expect({ said: said(seen), events: names(seen.events), get: seen.get, audience: seen.audience, before: seen.historyBefore }).toEqual({ said: [], events: [], get: { status: 403, code: "unauthorized" }, audience: ephemeral ? `slack_ephemeral:${user}` : undefined, before: ephemeral });
      expect(seen.history.length).toBeGreaterThan(0);
    }
    const mine = await readAs(c, "U-BOB", secret.eventId, true);
    expect({ said: said(mine).sort(), get: mine.get.status, event: names(mine.events).some((e) => e.event_id === secret.eventId), before: mine.historyBefore }).toEqual({
      said: ["re: secret recipe", "re: secret recipe", "secret recipe", "secret recipe"],
      get: 200,
      event: true,
      before: true,
    });
  });
});
