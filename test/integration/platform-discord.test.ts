import { generateKeyPairSync, sign as edSign, type KeyObject } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { ANSWER_FILE, fileOf, formOf, gapsBetween, startChatRunner, startFakePlatform, waitFor, type FakeReply, type PlatformCall } from "../support/fake-platform";
import { TABLE_ALIGNED, TABLE_ANSWER } from "../support/markdown-sample";

const APPLICATION_ID = "1122334455667788";
const BOT_TOKEN = "discord-bot-token-SECRET-0123456789";
const FILE = new Uint8Array([1, 2, 3, 4, 5]);
/** Interaction tokens whose first write the fake answers 429 with retry_after 0.3. */
const throttledTokens = new Set<string>();
/** Interaction tokens Discord no longer honours (past their 15 minutes), and ones that expire after their first write. */
const expiredTokens = new Set<string>();
const expiringTokens = new Set<string>();
let channelMessages = 0;
/** What each channel's history shows the bot (GET /channels/{id}/messages), newest first; a channel not listed refuses it (403). */
const channelHistory = new Map<string, Record<string, unknown>[]>();
/** Interaction tokens whose first edit of @original is applied, then answered 504 (a gateway stopped waiting). */
const gatewayTimeouts = new Set<string>();
/** Channel message ids whose first edit the fake answers 429. */
const throttledEdits = new Set<string>();
/** Channels whose first history read the fake answers 429. */
const throttledHistory = new Set<string>();
/** Interaction tokens of an app installed only to the user: Discord takes 5 follow-ups, then answers 400 (40094). */
const userInstallTokens = new Set<string>();
const followupsOf = new Map<string, number>();
/** Interaction tokens whose follow-ups spend their bucket (`X-RateLimit-Remaining: 0`, reset after 0.6 s): one sooner is a 429. */
const bucketedTokens = new Set<string>();
const bucketResetAt = new Map<string, number>();
/**
 * Interaction tokens whose "thinking…" was deleted: Discord answers their response's edit and follow-ups "Unknown
 * Message" (404, 10008); and ones whose response is deleted once their first write lands. Channel messages
 * (`{channel}/{id}`) deleted too.
 */
const deletedResponses = new Set<string>();
const deletingResponses = new Set<string>();
const deletedChannelMessages = new Set<string>();

let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startChatRunner>>;
let privateKey: KeyObject;
let publicKeyHex: string;
let botId: string;
let webhookUrl: string;
let followups = 0;
const answered: string[] = [];

function discordApi(call: PlatformCall): FakeReply | Promise<FakeReply> {
  if (call.path === "/cdn/attachments/report.txt") return { bytes: FILE, headers: { "content-type": "text/plain" } };
  // A file slow to download: its interaction reaches its conversation after one sent later.
  if (call.path === "/cdn/attachments/slow.txt") return new Promise((r) => setTimeout(() => r({ bytes: FILE, headers: { "content-type": "text/plain" } }), 800));
  const ch = /^\/channels\/([^/]+)\/messages(?:\/(.+))?$/.exec(call.path);
  if (ch) {
    // The bot's own API: its token in the Authorization header.
    if (call.headers.authorization !== `Bot ${BOT_TOKEN}`) return { status: 401, json: { message: "401: Unauthorized", code: 0 } };
    if (call.method === "GET" && !ch[2] && throttledHistory.delete(ch[1])) return { status: 429, json: { message: "You are being rate limited.", retry_after: 0.3, global: false } };
    if (call.method === "GET" && !ch[2]) {
      const history = channelHistory.get(ch[1]);
      return history ? { json: history.filter((m) => BigInt(String(m.id)) > BigInt(call.query.get("after") ?? "0")) } : { status: 403, json: { message: "Missing Access", code: 50001 } };
    }
    if (call.method === "POST" && !ch[2]) return { json: { id: `channel_msg_${++channelMessages}`, channel_id: ch[1], content: call.body?.content } };
    if (call.method === "PATCH" && ch[2] && deletedChannelMessages.has(`${ch[1]}/${ch[2]}`)) return { status: 404, json: { message: "Unknown Message", code: 10008 } };
    if (call.method === "PATCH" && ch[2] && throttledEdits.delete(ch[2])) return { status: 429, json: { message: "You are being rate limited.", retry_after: 0.3, global: false } };
    if (call.method === "PATCH" && ch[2]) return { json: { id: ch[2], channel_id: ch[1], content: call.body?.content } };
    return { status: 405, json: { message: "405: Method Not Allowed", code: 0 } };
  }
  const m = /^\/webhooks\/([^/]+)\/([^/]+)(?:\/messages\/(.+))?$/.exec(call.path);
  if (!m || m[1] !== APPLICATION_ID) return { status: 404, json: { message: "Unknown Webhook", code: 10015 } };
  if (expiredTokens.has(m[2])) return { status: 401, json: { message: "Invalid Webhook Token", code: 50027 } };
  if (expiringTokens.delete(m[2])) expiredTokens.add(m[2]);
  if (deletedResponses.has(m[2]) && (call.method === "POST" || m[3] === "@original")) return { status: 404, json: { message: "Unknown Message", code: 10008 } };
  if (deletingResponses.delete(m[2])) deletedResponses.add(m[2]);
  if (throttledTokens.delete(m[2])) return { status: 429, headers: { "retry-after": "1" }, json: { message: "You are being rate limited.", retry_after: 0.3, global: false } };
  if (call.method === "PATCH" && m[3] === "@original" && gatewayTimeouts.delete(m[2])) return { status: 504, json: { message: "upstream timeout" } };
  if (call.method === "POST" && userInstallTokens.has(m[2])) {
    const n = (followupsOf.get(m[2]) ?? 0) + 1;
    if (n > 5) return { status: 400, json: { message: "This interaction has hit the maximum number of follow up messages", code: 40094 } };
    followupsOf.set(m[2], n);
  }
  if (call.method === "POST" && bucketedTokens.has(m[2])) {
    const wait = (bucketResetAt.get(m[2]) ?? 0) - Date.now();
    const headers = { "x-ratelimit-limit": "1", "x-ratelimit-remaining": "0", "x-ratelimit-reset-after": wait > 0 ? (wait / 1000).toFixed(3) : "0.600", "x-ratelimit-bucket": `followups-${m[2].slice(-12)}` };
    if (wait > 0) return { status: 429, headers, json: { message: "You are being rate limited.", retry_after: wait / 1000, global: false } };
    bucketResetAt.set(m[2], Date.now() + 600);
    return { headers, json: { id: `followup_${++followups}`, content: call.body?.content } };
  }
  // A multipart write (a file) has no JSON body.
  if (call.method === "PATCH") return { json: { id: m[3] === "@original" ? "original_msg" : m[3], content: call.body?.content } };
  if (call.method === "POST") return { json: { id: `followup_${++followups}`, content: call.body?.content } };
  return { status: 405, json: { message: "405: Method Not Allowed", code: 0 } };
}

beforeAll(async () => {
  const pair = generateKeyPairSync("ed25519");
  privateKey = pair.privateKey;
  // The raw 32-byte key is the tail of the SPKI encoding.
  publicKeyHex = pair.publicKey.export({ type: "spki", format: "der" }).subarray(-32).toString("hex");
  fake = await startFakePlatform(discordApi);
  runner = await startChatRunner("discord-chat");
  host = await startTestHost({ captureLogs: true });
  const created = await host.admin("POST", "/v1/admin/bots", { platform: "discord", api_base_url: fake.url, credentials: { application_id: APPLICATION_ID, public_key: publicKeyHex, bot_token: BOT_TOKEN } });
  expect(created.status).toBe(201);
  answered.push(JSON.stringify(created.body));
  botId = created.body.bot_id;
  webhookUrl = created.body.webhook_url;
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "discord-agent", scope: { type: "bot", id: botId } });
  // One channel's agent speaks Chinese.
  const zh = { agent_id: "discord-zh", name: "zh", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: "C7" }, delivery_policy: { failure_notice: "抱歉，这次没能回答。" } };
  expect((await host.admin("POST", "/v1/admin/agents", zh)).status).toBe(201);
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

async function postRaw(body: string, headers: Record<string, string>) {
  const res = await fetch(webhookUrl, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });
  const text = await res.text();
  answered.push(text);
  return { status: res.status, body: text ? JSON.parse(text) : null };
}
function signed(body: string, key = privateKey, at = Date.now()) {
  const timestamp = String(Math.floor(at / 1000));
  return { "x-signature-timestamp": timestamp, "x-signature-ed25519": edSign(null, Buffer.from(timestamp + body), key).toString("hex") };
}
const post = (interaction: unknown) => {
  const body = JSON.stringify(interaction);
  return postRaw(body, signed(body));
};

let seq = 0;
function interaction(type: number, data: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  const id = `9${String(++seq).padStart(17, "0")}`;
  return {
    id,
    application_id: APPLICATION_ID,
    type,
    token: `interaction-token-${id}-secret`,
    version: 1,
    guild_id: "G1",
    channel_id: "C1",
    channel: { id: "C1", type: 0 },
    member: { user: { id: "U42", username: "ada", global_name: "Ada" } },
    data,
    ...extra,
  };
}
const command = (question: string, extra: Record<string, unknown> = {}) => interaction(2, { id: "cmd1", name: "ask", type: 1, options: [{ name: "question", type: 3, value: question }] }, extra);

const writesFor = (i: { token: string }) => fake.calls.filter((c) => c.path.startsWith(`/webhooks/${APPLICATION_ID}/${i.token}`));
const contextFor = (text: string) => runner.contexts.filter((c) => c.input.text === text);
const runOf = (i: { id: string }) => waitFor(() => runner.contexts.find((c) => c.event.event_id === `discord:${botId}:${i.id}`), 10_000, `the run of interaction ${i.id}`);

describe("Discord: interactions over HTTP, answered by editing the deferred response", () => {
  it("answers PING with PONG", async () => {
    expect(await post({ id: "1", application_id: APPLICATION_ID, type: 1, token: "t", version: 1 })).toEqual({ status: 200, body: { type: 1 } });
  });

  it("defers a slash command at once and delivers the answer by editing the original response", async () => {
    const i = command("hello discord");
    const started = Date.now();
    const res = await post(i);
    expect(Date.now() - started).toBeLessThan(3000);
    expect(res).toEqual({ status: 200, body: { type: 5 } });
    const [edit] = await waitFor(() => writesFor(i).length > 0 && writesFor(i));
    expect(edit.method).toBe("PATCH");
    expect(edit.path).toBe(`/webhooks/${APPLICATION_ID}/${i.token}/messages/@original`);
    expect(edit.body).toEqual({ content: "echo: hello discord", allowed_mentions: { parse: [] } });
    const [ctx] = contextFor("hello discord");
    expect(ctx.event).toMatchObject({ event_id: `discord:${botId}:${i.id}`, source: "discord", source_event_type: "APPLICATION_COMMAND" });
    expect(ctx.event.data).toMatchObject({ guild_id: "G1", channel_id: "C1", command: { name: "ask", path: [], options: { question: "hello discord" } } });
    expect(ctx.conversation).toMatchObject({ conversation_id: "C1", thread_id: null, sender_id: "U42" });
    expect(ctx.delivery).toMatchObject({ surface: "discord", reply_target: { channel_id: "C1", interaction_id: i.id }, supports_edit: true, max_message_size: 2000 });
    expect(JSON.stringify(ctx)).not.toContain(i.token);
  });

  it("gives a message command (Apps → command on a message) that message as input, and names it as the command's target", async () => {
    const target = { id: "M-TARGET-1", channel_id: "C1", content: "The quarterly numbers are up 12%.", author: { id: "U7", username: "bob" } };
    const i = interaction(2, { id: "cmd-ctx", name: "Summarize", type: 3, target_id: target.id, resolved: { messages: { [target.id]: target } } });
    expect((await post(i)).body).toEqual({ type: 5 });
    const [ctx] = await waitFor(() => contextFor(target.content).length > 0 && contextFor(target.content));
    expect(ctx.event.data.command).toEqual({ name: "Summarize", path: [], options: {}, target: { type: "message", id: target.id, content: target.content, author_id: "U7", author_name: "bob" } });
  });

  it("reads a user command as chosen, its name and the user it was used on, and names that user as its target", async () => {
    const i = interaction(2, { id: "cmd-user", name: "Profile", type: 2, target_id: "U7", resolved: { users: { U7: { id: "U7", username: "bob", global_name: null } } } });
    expect((await post(i)).body).toEqual({ type: 5 });
    const ctx = await runOf(i);
    expect(ctx.input.text).toBe("/Profile @bob");
    expect(ctx.event.data.command.target).toEqual({ type: "user", id: "U7", name: "bob" });
    // Another command on the same user reads otherwise; a message command on a message without words, its name.
    const ban = interaction(2, { id: "cmd-ban", name: "Ban", type: 2, target_id: "U7", resolved: { users: { U7: { id: "U7", username: "bob", global_name: null } } } });
    const target = { id: "M-TARGET-2", channel_id: "C1", content: "", author: { id: "U7", username: "bob" }, attachments: [] };
    const bare = interaction(2, { id: "cmd-ctx", name: "Summarize", type: 3, target_id: target.id, resolved: { messages: { [target.id]: target } } });
    for (const x of [ban, bare]) expect((await post(x)).body).toEqual({ type: 5 });
    expect((await runOf(ban)).input.text).toBe("/Ban @bob");
    expect((await runOf(bare)).input.text).toBe("/Summarize");
  });

  it("gives a message command a forwarded message's words and files, a bot's embeds as text and mentions by name, never just its name or ids", async () => {
    const file = { id: "A9", filename: "report.txt", content_type: "text/plain", url: `${fake.url}/cdn/attachments/report.txt` };
    // A forward has no content of its own: what was forwarded is its snapshot.
    const forward = { id: "M-FWD", channel_id: "C1", content: "", author: { id: "U7", username: "bob" }, attachments: [], message_reference: { type: 1, message_id: "M-ORIG" }, message_snapshots: [{ message: { type: 0, content: "Ship date moved to May 3.", attachments: [file], embeds: [] } }] };
    const fwd = interaction(2, { id: "cmd-ctx", name: "Summarize", type: 3, target_id: forward.id, resolved: { messages: { [forward.id]: forward } } });
    // A bot's post that says everything in an embed; a user's link, whose preview is Discord's and not read, and whose
    // mentions read as the server shows those users (one Discord did not list stays as written).
    const embed = { type: "rich", author: { name: "CI" }, title: "Build #512 failed", url: "https://ci.example/512", description: "3 tests failed on main.", fields: [{ name: "Branch", value: "main", inline: true }, { name: "Commit", value: "abc123" }], footer: { text: "ci.example" } };
    const botPost = { id: "M-EMB", channel_id: "C1", content: "", author: { id: "B1", username: "ci-bot", bot: true }, attachments: [], embeds: [embed] };
    const botCmd = interaction(2, { id: "cmd-ctx", name: "Summarize", type: 3, target_id: botPost.id, resolved: { messages: { [botPost.id]: botPost } } });
    const mentions = [{ id: "108", username: "cy", global_name: "Cy", member: { nick: "Cyrus" } }, { id: "109", username: "dee", global_name: null }];
    const link = { id: "M-LINK", channel_id: "C1", content: "<@108> <@!109> see https://news.example/a (<@404>)", author: { id: "U7", username: "bob" }, attachments: [], mentions, embeds: [{ type: "article", title: "Preview", description: "not said by bob" }] };
    const linkCmd = interaction(2, { id: "cmd-ctx", name: "Summarize", type: 3, target_id: link.id, resolved: { messages: { [link.id]: link } } });
    for (const i of [fwd, botCmd, linkCmd]) expect((await post(i)).body).toEqual({ type: 5 });
    const forwarded = await runOf(fwd);
    expect(forwarded.input.text).toBe("Ship date moved to May 3.");
    expect(forwarded.input.attachments).toMatchObject([{ name: "report.txt", mime_type: "text/plain", size_bytes: FILE.length }]);
    expect(forwarded.event.data.command.target).toMatchObject({ type: "message", id: "M-FWD", content: "", forwarded: true });
    expect((await runOf(botCmd)).input.text).toBe("CI\nBuild #512 failed (https://ci.example/512)\n3 tests failed on main.\nBranch: main\nCommit: abc123\nci.example");
    const linked = await runOf(linkCmd);
    expect(linked.input.text).toBe("@Cyrus @dee see https://news.example/a (<@404>)");
    expect(linked.event.data.command.target.content).toBe(link.content);
  });

  it("gives a message command a poll as its question and answers (the votes once anyone voted) and a sticker as its name, as Telegram's read", async () => {
    const poll = {
      question: { text: "Lunch?" },
      answers: [{ answer_id: 1, poll_media: { text: "Pizza" } }, { answer_id: 2, poll_media: { text: "Sushi", emoji: { id: null, name: "🍣" } } }, { answer_id: 3, poll_media: { emoji: { id: "41771983429993937", name: "tacos" } } }],
      expiry: "2030-01-01T00:00:00.000000+00:00",
      allow_multiselect: true,
      layout_type: 1,
      results: { is_finalized: true, answer_counts: [{ id: 1, count: 2, me_voted: false }, { id: 2, count: 1, me_voted: true }] },
    };
    const pollPost = { id: "M-POLL", channel_id: "C1", content: "", author: { id: "U7", username: "bob" }, attachments: [], embeds: [], poll };
    const unvoted = { ...pollPost, id: "M-POLL-2", poll: { ...poll, allow_multiselect: false, results: { is_finalized: false, answer_counts: [] } } };
    const stickerPost = { id: "M-STICKER", channel_id: "C1", content: "", author: { id: "U7", username: "bob" }, attachments: [], sticker_items: [{ id: "749054660769218631", name: "Wave", format_type: 1 }] };
    // A forward of a sticker: its snapshot names it.
    const forward = { id: "M-FWD-STICKER", channel_id: "C1", content: "", author: { id: "U7", username: "bob" }, attachments: [], message_snapshots: [{ message: { type: 0, content: "", attachments: [], embeds: [], sticker_items: [{ id: "1", name: "Party", format_type: 3 }] } }] };
    const commands = [pollPost, unvoted, stickerPost, forward].map((m) => interaction(2, { id: "cmd-ctx", name: "Summarize", type: 3, target_id: m.id, resolved: { messages: { [m.id]: m } } }));
    for (const i of commands) expect((await post(i)).body).toEqual({ type: 5 });
    const [voted, open, sticker, forwarded] = await Promise.all(commands.map(runOf));
    expect(voted.input.text).toBe("📊 Poll: Lunch? (multiple answers, closed)\n- Pizza (2 votes)\n- Sushi (1 votes)\n- :tacos: (0 votes)");
    expect(open.input.text).toBe("📊 Poll: Lunch?\n- Pizza\n- Sushi\n- :tacos:");
    expect(sticker.input.text).toBe("Sticker: Wave");
    expect(forwarded.input.text).toBe("Sticker: Party");
    expect(forwarded.event.data.command.target).toMatchObject({ id: "M-FWD-STICKER", forwarded: true });
  });

  it("reads a command with a subcommand as typed, so /todo add and /todo remove differ; a plain command is its values", async () => {
    const todo = (sub: string, item: string) => interaction(2, { id: "cmd-todo", name: "todo", type: 1, options: [{ name: sub, type: 1, options: [{ name: "item", type: 3, value: item }] }] });
    const add = todo("add", "milk");
    const remove = todo("remove", "milk");
    // A subcommand group: `/settings notify set on`; a subcommand without options: `/todo list`.
    const grouped = interaction(2, { id: "cmd-settings", name: "settings", type: 1, options: [{ name: "notify", type: 2, options: [{ name: "set", type: 1, options: [{ name: "enabled", type: 5, value: true }] }] }] });
    const list = interaction(2, { id: "cmd-todo", name: "todo", type: 1, options: [{ name: "list", type: 1 }] });
    for (const i of [add, remove, grouped, list]) expect((await post(i)).body).toEqual({ type: 5 });
    expect((await runOf(add)).input.text).toBe("/todo add milk");
    expect((await runOf(remove)).input.text).toBe("/todo remove milk");
    const settings = await runOf(grouped);
    expect(settings.input.text).toBe("/settings notify set true");
    expect(settings.event.data.command).toEqual({ name: "settings", path: ["notify", "set"], options: { enabled: true } });
    expect((await runOf(list)).input.text).toBe("/todo list");
  });

  it("names the users, roles and channels a command's options and a select menu pick as the server shows them, never as bare ids", async () => {
    const resolved = {
      users: { "222": { id: "222", username: "bob", global_name: "Bob" }, "333": { id: "333", username: "cy", global_name: null } },
      members: { "222": { nick: "Bobby", roles: [] } },
      roles: { "444": { id: "444", name: "Moderators" } },
      channels: { "555": { id: "555", name: "general", type: 0 } },
    };
    const options = [
      { name: "who", type: 6, value: "222" },
      { name: "where", type: 7, value: "555" },
      { name: "notify", type: 8, value: "444" },
      { name: "cc", type: 9, value: "333" },
      { name: "what", type: 3, value: "call mom" },
    ];
    const remind = interaction(2, { id: "cmd-remind", name: "remind", type: 1, options, resolved });
    expect((await post(remind)).body).toEqual({ type: 5 });
    const ctx = await runOf(remind);
    expect(ctx.input.text).toBe("@Bobby #general @Moderators @cy call mom");
    // The ids stay in the command's options.
    expect(ctx.event.data.command.options).toEqual({ who: "222", where: "555", notify: "444", cc: "333", what: "call mom" });

    const pick = interaction(3, { custom_id: "assign", component_type: 5, values: ["222", "333"], resolved }, { message: { id: "M2" } });
    expect((await post(pick)).body).toEqual({ type: 5 });
    const picked = await runOf(pick);
    expect(picked.input.text).toBe("@Bobby @cy");
    expect(picked.event.data.component).toEqual({ custom_id: "assign", component_type: 5, values: ["222", "333"] });
  });

  it("names the user by their server nickname, as the server shows them", async () => {
    const i = command("who am I", { member: { nick: "Captain Ada", user: { id: "U42", username: "ada", global_name: "Ada" } } });
    expect((await post(i)).body).toEqual({ type: 5 });
    expect((await runOf(i)).actor).toMatchObject({ actor_id: "U42", actor_name: "Captain Ada", metadata: { username: "ada" } });

    // A user command's target too.
    const profile = interaction(2, { id: "cmd-user", name: "Whois", type: 2, target_id: "U7", resolved: { users: { U7: { id: "U7", username: "bob", global_name: "Bob" } }, members: { U7: { nick: "Bobby" } } } });
    expect((await post(profile)).body).toEqual({ type: 5 });
    const whois = await runOf(profile);
    expect(whois.input.text).toBe("/Whois @Bobby");
    expect(whois.event.data.command.target).toEqual({ type: "user", id: "U7", name: "Bobby" });
  });

  it("resolves the deferred response with a short notice when the run fails before answering", async () => {
    const i = command("fail");
    expect((await post(i)).body).toEqual({ type: 5 });
    const [edit] = await waitFor(() => writesFor(i).length > 0 && writesFor(i));
    expect(edit.method).toBe("PATCH");
    expect(edit.path).toBe(`/webhooks/${APPLICATION_ID}/${i.token}/messages/@original`);
    expect(edit.body.content).toBe("Sorry, I could not answer this time.");

    // An agent's delivery policy words the notice in its bot's language.
    const zh = command("fail", { channel_id: "C7", channel: { id: "C7", type: 0 } });
    expect((await post(zh)).body).toEqual({ type: 5 });
    const [zhEdit] = await waitFor(() => writesFor(zh).length > 0 && writesFor(zh));
    expect(zhEdit.body.content).toBe("抱歉，这次没能回答。");
  });

  it("resolves the deferred response of a run a newer interaction interrupted", async () => {
    const interrupting = { agent_id: "discord-interrupt", name: "interrupt", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: "C9" }, concurrency: { strategy: "interrupt" } };
    expect((await host.admin("POST", "/v1/admin/agents", interrupting)).status).toBe(201);
    const inC9 = { channel_id: "C9", channel: { id: "C9", type: 0 } };
    const first = command("sleep 5000", inC9);
    expect((await post(first)).body).toEqual({ type: 5 });
    await waitFor(() => contextFor("sleep 5000").length > 0);
    const second = command("newer", inC9);
    expect((await post(second)).body).toEqual({ type: 5 });
    const [edit] = await waitFor(() => writesFor(first).length > 0 && writesFor(first), 10_000, "the first interaction resolved");
    expect([edit.method, edit.path, edit.body.content]).toEqual(["PATCH", `/webhooks/${APPLICATION_ID}/${first.token}/messages/@original`, "(This answer was cancelled.)"]);
    expect((await host.waitForRun(contextFor("sleep 5000")[0].run_id)).status).toBe("cancelled");
    await waitFor(() => writesFor(second).some((w) => w.body.content === "echo: newer"));
  });

  it("tells an interaction sent before one already being answered (interrupt) that the newer one is answered instead, not that it is busy", async () => {
    const interrupting = { agent_id: "discord-interrupt-order", name: "interrupt", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: "C12" }, concurrency: { strategy: "interrupt" } };
    expect((await host.admin("POST", "/v1/admin/agents", interrupting)).status).toBe(201);
    const inC12 = { channel_id: "C12", channel: { id: "C12", type: 0 } };
    const file = { A2: { id: "A2", filename: "slow.txt", content_type: "text/plain", url: `${fake.url}/cdn/attachments/slow.txt` } };
    // Sent first (the smaller snowflake), its file slow to download: it reaches the conversation after the next one.
    const older = interaction(2, { name: "summarize", type: 1, options: [{ name: "file", type: 11, value: "A2" }], resolved: { attachments: file } }, inC12);
    const newer = command("sleep 3000", inC12);
    const olderAck = post(older);
    await new Promise((r) => setTimeout(r, 50));
    expect((await post(newer)).body).toEqual({ type: 5 });
    expect((await olderAck).body).toEqual({ type: 4, data: { content: "A newer request here is answered instead of this one.", flags: 64 } });
    const [row] = await host.query<{ metadata_json: string }>("SELECT metadata_json FROM event_log WHERE event_id = ?", [`discord:${botId}:${older.id}`]);
    expect(JSON.parse(row.metadata_json).rejection).toMatchObject({ reason: "newer_message", strategy: "interrupt" });
    await waitFor(() => writesFor(newer).some((w) => w.body.content === "echo: sleep 3000"), 10_000, "the newer interaction answered");
  });

  it("resolves the deferred response of an interaction cancelled while it waited its turn", async () => {
    const inC10 = { channel_id: "C10", channel: { id: "C10", type: 0 } };
    const busy = command("sleep 1500", inC10);
    expect((await post(busy)).body).toEqual({ type: 5 });
    await waitFor(() => contextFor("sleep 1500").length > 0);
    const waiting = command("waiting", inC10);
    expect((await post(waiting)).body).toEqual({ type: 5 });
    const [queued] = (await host.admin("GET", "/v1/runs?conversation_id=C10&status=created")).body.items;
    expect((await host.admin("POST", `/v1/runs/${queued.run_id}/cancel`)).status).toBe(202);
    const [edit] = await waitFor(() => writesFor(waiting).length > 0 && writesFor(waiting), 10_000, "the waiting interaction resolved");
    expect([edit.method, edit.path, edit.body.content]).toEqual(["PATCH", `/webhooks/${APPLICATION_ID}/${waiting.token}/messages/@original`, "(This answer was cancelled.)"]);
    await waitFor(() => writesFor(busy).some((w) => w.body.content === "echo: sleep 1500"));
    expect(contextFor("waiting")).toEqual([]);
  });

  it("resolves the deferred response of an interaction cancelled before its hand-over reached the conversation", async () => {
    const i = command("cancelled on its way", { channel_id: "C11", channel: { id: "C11", type: 0 } });
    // The database's answer to ingress's write is slow: the run is recorded (created) and cancelled before its hand-over.
    host.databaseOutage({ answerDelayMs: 1_500, matching: "cancelled on its way" });
    const posting = post(i);
    let runId: string | undefined;
    while (!(runId = (await host.admin("GET", "/v1/runs?conversation_id=C11&status=created")).body.items[0]?.run_id)) await new Promise((r) => setTimeout(r, 10));
    expect((await host.admin("POST", `/v1/runs/${runId}/cancel`)).status).toBe(202);
    expect((await posting).body).toEqual({ type: 5 });
    const [edit] = await waitFor(() => writesFor(i).length > 0 && writesFor(i), 10_000, "the interaction resolved");
    expect([edit.method, edit.path, edit.body.content]).toEqual(["PATCH", `/webhooks/${APPLICATION_ID}/${i.token}/messages/@original`, "(This answer was cancelled.)"]);
    expect((await host.waitForRun(runId)).status).toBe("cancelled");
    expect(contextFor("cancelled on its way")).toEqual([]);
  });

  it("a draft longer than the final answer leaves no stale follow-up text", async () => {
    const i = command("shrink");
    expect((await post(i)).body).toEqual({ type: 5 });
    const shown = () => {
      const latest = new Map<string, string>();
      for (const w of writesFor(i)) latest.set(w.method === "POST" ? (w.reply!.json as any).id : w.path.split("/messages/")[1], w.body.content);
      return latest;
    };
    await waitFor(() => shown().get("@original") === "short final" && [...shown().values()].filter((t) => t === "…").length === 1, 15_000);
    expect([...shown().values()].sort()).toEqual(["short final", "…"].sort());
    // The draft really spilled into a follow-up before the final answer shrank it.
    expect(writesFor(i).some((w) => w.method === "POST" && String(w.body.content).startsWith("line"))).toBe(true);
  });

  it("refuses a bad, foreign, missing or replayed signature with 401", async () => {
    const before = runner.calls.length;
    const body = JSON.stringify(command("forged"));
    const other = generateKeyPairSync("ed25519").privateKey;
    const foreign = await postRaw(body, signed(body, other));
    const tampered = await postRaw(body.replace("forged", "forgee"), signed(body));
    const missing = await postRaw(body, {});
    // Signed by Discord, but six minutes ago: a captured request replayed.
    const replayed = await postRaw(body, signed(body, privateKey, Date.now() - 6 * 60_000));
    expect(replayed.body.error.message).toMatch(/X-Signature-Timestamp is more than 5 minutes away/);
    for (const res of [foreign, tampered, missing, replayed]) expect(res.status).toBe(401);
    // Nothing was recorded, so nothing can run.
    expect(await host.query("SELECT 1 FROM event_log WHERE input_summary IN ('forged', 'forgee')")).toEqual([]);
    expect(runner.calls.length).toBe(before);
  });

  it("never runs a replayed interaction twice", async () => {
    const i = command("just once");
    await post(i);
    await waitFor(() => writesFor(i).length > 0);
    expect(await post(i)).toEqual({ status: 200, body: { type: 5 } });
    // A barrier instead of a sleep: once a later command of the channel is answered, a second run of the first would have been too.
    const marker = command("marker");
    await post(marker);
    await waitFor(() => writesFor(marker).length > 0);
    expect(contextFor("just once")).toHaveLength(1);
    expect(writesFor(i)).toHaveLength(1);
  });

  it("streams by editing the original response at most once a second, ending exactly on the final text", async () => {
    const i = command("stream red green blue cyan magenta");
    await post(i);
    const final = "red green blue cyan magenta";
    const writes = await waitFor(() => writesFor(i).some((w) => w.body.content === final) && writesFor(i), 15_000, "the final edit");
    expect(writes.every((w) => w.method === "PATCH" && w.path.endsWith("/messages/@original"))).toBe(true);
    expect(writes.length).toBeGreaterThanOrEqual(2);
    expect(writes.at(-1)!.body.content).toBe(final);
    for (const gap of gapsBetween(writes.map((w) => w.at))) expect(gap).toBeGreaterThanOrEqual(950);
  });

  it("a stream that outgrows 2000 characters continues in a follow-up, both ending exact", async () => {
    const i = command("bigstream 5 600");
    await post(i);
    const runId = await waitFor(() => contextFor("bigstream 5 600")[0]?.run_id);
    const final = ((await host.waitForRun(runId)).message as { content: string }).content;
    expect(final.length).toBeGreaterThan(2000);
    const settled = () => {
      const shown = new Map<string, string>();
      for (const w of writesFor(i)) shown.set(w.method === "POST" ? (w.reply!.json as any).id : w.path.split("/messages/")[1], w.body.content);
      return [...shown.values()];
    };
    const messages = await waitFor(() => settled().join("") === final && settled(), 15_000, "the exact final text across messages");
    expect(messages).toHaveLength(2);
    expect(messages.every((m) => m.length <= 2000)).toBe(true);
    const original = writesFor(i).filter((w) => w.path.endsWith("/messages/@original"));
    for (const gap of gapsBetween(original.map((w) => w.at))) expect(gap).toBeGreaterThanOrEqual(950);
  });

  it("sends a table, which Discord's Markdown lacks, as an aligned code block; the rest of the Markdown as written, for Discord to render", async () => {
    const i = command(`samefinal ${TABLE_ANSWER}`);
    await post(i);
    const [edit] = await waitFor(() => writesFor(i).length > 0 && writesFor(i), 15_000, "the answer");
    expect(edit.body.content).toBe(
      [
        "Prices:",
        "```",
        ...TABLE_ALIGNED,
        "```",
        ...TABLE_ANSWER.split("\n").slice(6),
      ].join("\n"),
    );
  });

  it("splits a long answer: the original response, then follow-up messages", async () => {
    const i = command("long 4500");
    await post(i);
    const writes = await waitFor(() => writesFor(i).length >= 3 && writesFor(i));
    expect(writes.map((w) => w.method)).toEqual(["PATCH", "POST", "POST"]);
    expect(writes[1].query.get("wait")).toBe("true");
    expect(writes.every((w) => w.body.content.length <= 2000)).toBe(true);
    expect(writes.map((w) => w.body.content).join("")).toHaveLength(4500);
  });

  it("makes again an edit of the original response that may have been applied, never writing the next part over it", async () => {
    const i = command("long 3000");
    gatewayTimeouts.add(i.token);
    await post(i);
    const writes = await waitFor(() => writesFor(i).length >= 3 && writesFor(i));
    // The edit is repeated (the same text twice shows once); the second part is a follow-up, not an edit of the original.
    expect(writes.map((w) => [w.method, w.path.endsWith("/@original")])).toEqual([["PATCH", true], ["PATCH", true], ["POST", false]]);
    expect(writes[1].body.content).toBe(writes[0].body.content);
    expect(writes.slice(1).map((w) => w.body.content).join("")).toHaveLength(3000);
  });

  it("waits the retry_after of a 429 (seconds, fractional) before editing again", async () => {
    const i = command("discord busy");
    throttledTokens.add(i.token);
    await post(i);
    const writes = await waitFor(() => writesFor(i).length >= 2 && writesFor(i));
    expect(writes[1].at - writes[0].at).toBeGreaterThanOrEqual(280);
    const runId = contextFor("discord busy")[0].run_id;
    const failed = await waitFor(async () => (await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE run_id = ? AND event_type = 'delivery.failed'", [runId]))[0]);
    expect(JSON.parse(failed.data_json)).toMatchObject({ status: 429, retry_after_ms: 300, will_retry: true });
  });

  it("waits out a bucket Discord says is spent (X-RateLimit-Remaining: 0) before the next call of that route, rather than meeting a 429", async () => {
    const i = command("long 6500");
    bucketedTokens.add(i.token);
    await post(i);
    const runId = (await runOf(i)).run_id;
    await host.waitForRun(runId);
    const writes = await waitFor(() => writesFor(i).filter((w) => w.reply?.status === undefined || w.reply.status < 300).length >= 4 && writesFor(i), 15_000, "every part");
    expect(writes.map((w) => [w.method, w.reply?.status ?? 200])).toEqual([["PATCH", 200], ["POST", 200], ["POST", 200], ["POST", 200]]);
    expect(writes.map((w) => w.body.content).join("")).toHaveLength(6500);
    // Each follow-up waited for its bucket's reset (0.6 s) after the one before.
    for (const gap of gapsBetween(writes.slice(1).map((w) => w.at))) expect(gap).toBeGreaterThanOrEqual(550);
    const failed = await host.query("SELECT 1 FROM event_log WHERE run_id = ? AND event_type = 'delivery.failed'", [runId]);
    expect(failed).toEqual([]);
  });

  it("answers a button pressed twice in quick succession once: the second interaction gets a private notice, not a \"thinking…\" nothing would answer", async () => {
    const inC14 = { channel_id: "C14", channel: { id: "C14", type: 0 }, message: { id: "M14" } };
    const [first, second] = [interaction(3, { custom_id: "btn_go", component_type: 2 }, inC14), interaction(3, { custom_id: "btn_go", component_type: 2 }, inC14)];
    const acks = (await Promise.all([post(first), post(second)])).map((a) => a.body);
    expect(acks).toContainEqual({ type: 5 });
    expect(acks).toContainEqual({ type: 4, data: { content: "Already answering your earlier press of this button.", flags: 64 } });
    const answeredOne = acks[0].type === 5 ? first : second;
    const repeated = answeredOne === first ? second : first;
    await waitFor(() => writesFor(answeredOne).some((w) => w.body?.content === "echo: btn_go"), 10_000, "the press's answer");
    await new Promise((r) => setTimeout(r, 300));
    expect(writesFor(repeated)).toEqual([]);
    expect(contextFor("btn_go")).toHaveLength(1);
  });

  it("runs message components, keeps thread channels as threads, and stores attachment options", async () => {
    const button = interaction(3, { custom_id: "btn_yes", component_type: 2 }, { message: { id: "M1" } });
    expect((await post(button)).body).toEqual({ type: 5 });
    await waitFor(() => writesFor(button).length > 0);
    expect(contextFor("btn_yes")[0].event).toMatchObject({ source_event_type: "MESSAGE_COMPONENT", data: { component: { custom_id: "btn_yes" }, message_id: "M1" } });

    const inThread = command("in a thread", { channel_id: "T9", channel: { id: "T9", type: 11, parent_id: "C1" } });
    await post(inThread);
    await waitFor(() => writesFor(inThread).length > 0);
    expect(contextFor("in a thread")[0].conversation).toMatchObject({ conversation_id: "C1", thread_id: "T9" });

    const withFile = interaction(2, {
      name: "summarize",
      type: 1,
      options: [{ name: "file", type: 11, value: "A1" }],
      resolved: { attachments: { A1: { id: "A1", filename: "report.txt", content_type: "text/plain", url: `${fake.url}/cdn/attachments/report.txt` } } },
    });
    await post(withFile);
    await waitFor(() => writesFor(withFile).length > 0);
    const ctx = contextFor("/summarize")[0];
    expect(ctx.input.attachments[0]).toMatchObject({ name: "report.txt", mime_type: "text/plain", size_bytes: FILE.length });
  });

  it("answers each autocomplete keystroke at once with no choices, storing and recording none of them", async () => {
    const rawsBefore = (await host.r2Keys("raw/")).length;
    const keystrokes = ["h", "he", "hel"].map((value) => interaction(4, { name: "ask", type: 1, options: [{ name: "question", type: 3, value, focused: true }] }));
    for (const auto of keystrokes) expect(await post(auto)).toEqual({ status: 200, body: { type: 8, data: { choices: [] } } });
    const rows = await host.query("SELECT event_id FROM event_log WHERE source_event_type = 'APPLICATION_COMMAND_AUTOCOMPLETE'");
    expect(rows).toEqual([]);
    expect(await host.r2Keys("raw/")).toHaveLength(rawsBefore);
    // Still verified first: a forged keystroke is refused.
    const forged = JSON.stringify(keystrokes[0]);
    expect((await postRaw(forged, signed(forged, generateKeyPairSync("ed25519").privateKey))).status).toBe(401);
  });

  it("keeps the bot token and interaction tokens out of every answer, record and log line", async () => {
    const i = command("token check");
    await post(i);
    await waitFor(() => writesFor(i).length > 0);
    const forged = JSON.stringify(command("forged"));
    await postRaw(forged, signed(forged, generateKeyPairSync("ed25519").privateKey));
    const got = await host.admin("GET", `/v1/admin/bots/${botId}`);
    answered.push(JSON.stringify(got.body));
    expect(got.body.credential_fields).toEqual(["application_id", "bot_token", "public_key"]);
    const records = await host.query<{ row: string }>("SELECT data_json || metadata_json || COALESCE(input_json, '') AS row FROM event_log");
    const raws = await Promise.all((await host.r2Keys("raw/")).map(async (k) => new TextDecoder().decode((await host.r2Object(k))!)));
    expect(raws.length).toBeGreaterThan(0);
    expect(host.logs()).toMatch(/webhook refused/);
    for (const text of [...answered, ...records.map((r) => r.row), ...raws, host.logs()]) {
      expect(text).not.toContain(BOT_TOKEN);
      expect(text).not.toMatch(/interaction-token-\d+-secret/);
    }
  });
});

describe("Discord: an app installed only to the user (5 follow-ups per interaction)", () => {
  const inDm = { guild_id: undefined, member: undefined, user: { id: "U42", username: "ada", global_name: "Ada" }, channel_id: "D5", channel: { id: "D5", type: 1 }, context: 2 };
  const shownBy = (i: { token: string }) => {
    const shown = new Map<string, string>();
    for (const w of writesFor(i).filter((w) => (w.reply?.status ?? 200) < 300)) shown.set(w.method === "POST" ? (w.reply!.json as any).id : w.path.split("/messages/")[1], w.body.content);
    return shown;
  };
  const limitRefusals = async (runId: string) =>
    (await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE run_id = ? AND event_type = 'delivery.failed'", [runId])).map((r) => JSON.parse(r.data_json));

  it("shows what fits in the response and 5 follow-ups, the last saying the rest was cut, and records each part not shown", async () => {
    const i = command("long 14000", { ...inDm, authorizing_integration_owners: { "1": "U42" } });
    userInstallTokens.add(i.token);
    expect((await post(i)).body).toEqual({ type: 5 });
    const runId = (await runOf(i)).run_id;
    const final = ((await host.waitForRun(runId)).message as { content: string }).content;
    const refused = await waitFor(async () => ((await limitRefusals(runId)).length >= 2 ? limitRefusals(runId) : false), 15_000, "the parts past the limit recorded");
    expect(refused.every((r) => r.operation === "send" && r.code === "discord_followup_limit" && r.will_retry === false)).toBe(true);
    // Never past what Discord takes: the response, 5 follow-ups, then the last of them edited to say the rest was cut.
    const writes = writesFor(i);
    expect(writes.map((w) => [w.method, w.reply?.status ?? 200])).toEqual([["PATCH", 200], ...Array(5).fill(["POST", 200]), ["PATCH", 200]]);
    const lastFollowup = (writes[5].reply!.json as { id: string }).id;
    expect(writes[6].path).toBe(`/webhooks/${APPLICATION_ID}/${i.token}/messages/${lastFollowup}`);
    const messages = [...shownBy(i).values()];
    expect(messages).toHaveLength(6);
    expect(messages.every((m) => m.length <= 2000)).toBe(true);
    expect(messages.at(-1)).toMatch(/\n\n\(Discord lets this app post only 6 messages in reply here: the rest of this answer was cut\.\)$/);
    // The answer's start, in order, up to the notice.
    const shownText = messages.join("").replace(/\n\n\(Discord lets[^)]*\)$/, "");
    expect(final.startsWith(shownText.trimEnd())).toBe(true);
    expect(shownText.length).toBeGreaterThan(5 * 1900);

    // Installed to the server as well, the interaction is not limited: every part is posted.
    const both = command("long 14000", { authorizing_integration_owners: { "0": "G1", "1": "U42" } });
    expect((await post(both)).body).toEqual({ type: 5 });
    const bothFinal = ((await host.waitForRun((await runOf(both)).run_id)).message as { content: string }).content;
    await waitFor(() => [...shownBy(both).values()].join("") === bothFinal, 15_000, "the whole answer");
    expect(shownBy(both).size).toBeGreaterThan(6);
  });

  it("says so too when Discord refuses a follow-up for the limit the interaction did not name, and asks no more", async () => {
    const i = command("long 14000", { ...inDm, channel_id: "D6", channel: { id: "D6", type: 1 } });
    userInstallTokens.add(i.token);
    expect((await post(i)).body).toEqual({ type: 5 });
    const runId = (await runOf(i)).run_id;
    await host.waitForRun(runId);
    await waitFor(async () => (await limitRefusals(runId)).length >= 2, 15_000, "the parts past the limit recorded");
    expect(writesFor(i).map((w) => [w.method, w.reply?.status ?? 200])).toEqual([["PATCH", 200], ...Array(5).fill(["POST", 200]), ["POST", 400], ["PATCH", 200]]);
    expect([...shownBy(i).values()].at(-1)).toMatch(/the rest of this answer was cut\.\)$/);
    expect((await limitRefusals(runId)).map((r) => r.code)).toEqual(Array((await limitRefusals(runId)).length).fill("discord_followup_limit"));
  });
});

describe("Discord: files in answers", () => {
  const fileWrite = async (call: PlatformCall) => {
    const form = await formOf(call);
    return { payload: JSON.parse(String(form.get("payload_json"))), file: await fileOf(form, "files[0]") };
  };

  it("sends a file as a follow-up after the text, with the same mention guard", async () => {
    const i = command("attach chart.png");
    await post(i);
    const writes = await waitFor(() => writesFor(i).length >= 2 && writesFor(i), 15_000, "the follow-up");
    expect(writes[0]).toMatchObject({ method: "PATCH", path: `/webhooks/${APPLICATION_ID}/${i.token}/messages/@original`, body: { content: "here is chart.png" } });
    expect(writes[1]).toMatchObject({ method: "POST", path: `/webhooks/${APPLICATION_ID}/${i.token}` });
    expect(writes[1].query.get("wait")).toBe("true");
    const { payload, file } = await fileWrite(writes[1]);
    expect(payload).toEqual({ content: "", allowed_mentions: { parse: [] }, attachments: [{ id: 0, filename: "chart.png" }] });
    expect(file).toMatchObject({ name: "chart.png", type: "image/png" });
    expect(file.bytes.equals(ANSWER_FILE)).toBe(true);
  });

  it("names a file by its type's extension when the runner gave it no name, or one without an extension: Discord shows an image by its name", async () => {
    const unnamed = command("attachas image/png");
    const bare = command("attachas application/pdf quarterly-report");
    await post(unnamed);
    await post(bare);
    const sent = async (i: ReturnType<typeof command>) => (await fileWrite((await waitFor(() => writesFor(i).length >= 2 && writesFor(i), 15_000, "the follow-up"))[1])).file;
    const image = await sent(unnamed);
    const [stored] = await host.query<{ artifact_id: string; name: string | null }>("SELECT artifact_id, name FROM artifact WHERE run_id = ?", [contextFor("attachas image/png")[0].run_id]);
    // The stored artifact keeps no name: only what the chat is sent is named.
    expect(stored.name).toBeNull();
    expect(image).toMatchObject({ name: `${stored.artifact_id}.png`, type: "image/png" });
    expect(await sent(bare)).toMatchObject({ name: "quarterly-report.pdf", type: "application/pdf" });
  });

  it("resolves the deferred response with the file itself when the answer is files only", async () => {
    const i = command("attachonly report.pdf");
    await post(i);
    const [write] = await waitFor(() => writesFor(i).length >= 1 && writesFor(i), 15_000, "the answer");
    expect(write).toMatchObject({ method: "PATCH", path: `/webhooks/${APPLICATION_ID}/${i.token}/messages/@original` });
    const { file } = await fileWrite(write);
    expect(file).toMatchObject({ name: "report.pdf", type: "application/pdf" });
    expect(file.bytes.equals(ANSWER_FILE)).toBe(true);
    await host.waitForRun(contextFor("attachonly report.pdf")[0].run_id);
    const runId = contextFor("attachonly report.pdf")[0].run_id;
    // Sent, so no "could not be sent" notice follows it.
    const records = await waitFor(async () => {
      const rows = await host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type = 'delivery.succeeded'", [runId]);
      return rows.length > 0 && rows;
    });
    expect(records.map((r) => JSON.parse(r.data_json).operation)).toEqual(["send_file"]);
    expect(writesFor(i)).toHaveLength(1);
  });
});

describe("Discord: a file over the upload limit", () => {
  it("is not sent: the text is, and the record says why", async () => {
    const size = 10 * 1024 * 1024 + 1;
    const i = command(`upload huge.pdf ${size}`);
    await post(i);
    const runId = await waitFor(() => contextFor(`upload huge.pdf ${size}`)[0]?.run_id, 30_000, "the run");
    expect(contextFor(`upload huge.pdf ${size}`)[0].delivery.platform_capabilities.files).toEqual({ max_bytes: 10 * 1024 * 1024 });
    const failed = await waitFor(async () => {
      const rows = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE run_id = ? AND event_type = 'delivery.failed'", [runId]);
      return rows.length > 0 && rows.map((r) => JSON.parse(r.data_json));
    }, 30_000, "the delivery record");
    expect(failed).toMatchObject([{ operation: "send_file", code: "file_too_large", will_retry: false }]);
    expect(failed[0].error).toContain(`${size} bytes`);
    expect(writesFor(i).map((w) => [w.method, w.body?.content])).toEqual([["PATCH", "here is huge.pdf"]]);
  });
});

const channelWrites = (since: number) => fake.calls.filter((c) => c.path.startsWith("/channels/") && c.method !== "GET" && c.at >= since);
const deliveryRecords = async (runId: string) =>
  (await host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type IN ('delivery.succeeded', 'delivery.failed') ORDER BY seq", [runId])).map((r) => [
    r.event_type,
    JSON.parse(r.data_json).operation,
  ]);

describe("Discord: answers after the interaction token expires", () => {

  it("continues in the interaction's channel with the bot token, text and files, once Discord refuses the token (new messages when the placeholder cannot be found)", async () => {
    const since = Date.now();
    const i = command("attach late.png", { channel_id: "C21", channel: { id: "C21", type: 0 } });
    expiredTokens.add(i.token);
    expect((await post(i)).body).toEqual({ type: 5 });
    const writes = await waitFor(() => channelWrites(since).length >= 2 && channelWrites(since), 15_000, "the channel messages");
    // The deferred response was tried first, once; then the bot's own API.
    expect(writesFor(i).map((w) => [w.method, w.reply?.status])).toEqual([["PATCH", 401]]);
    expect(writes[0]).toMatchObject({ method: "POST", path: "/channels/C21/messages", body: { content: "here is late.png", allowed_mentions: { parse: [] } } });
    expect(writes.every((w) => w.headers.authorization === `Bot ${BOT_TOKEN}`)).toBe(true);
    const form = await formOf(writes[1]);
    expect(JSON.parse(String(form.get("payload_json")))).toEqual({ content: "", allowed_mentions: { parse: [] }, attachments: [{ id: 0, filename: "late.png" }] });
    expect((await fileOf(form, "files[0]")).bytes.equals(ANSWER_FILE)).toBe(true);
    const runId = contextFor("attach late.png")[0].run_id;
    await host.waitForRun(runId);
    expect(await waitFor(async () => (await deliveryRecords(runId)).length >= 2 && deliveryRecords(runId))).toEqual([
      ["delivery.succeeded", "send"],
      ["delivery.succeeded", "send_file"],
    ]);
  });

  it("replaces the “thinking…” placeholder it finds in the channel's history when the token was refused before the first answer", async () => {
    const since = Date.now();
    const i = command("attach later.png", { channel_id: "C23", channel: { id: "C23", type: 0 } });
    // Newest first: a later message, the placeholder (marked with its interaction), another interaction's, one from before.
    const after = (n: number) => String(BigInt(i.id) + BigInt(n));
    channelHistory.set("C23", [
      { id: after(9), content: "someone else" },
      { id: after(2), content: "", flags: 128, interaction_metadata: { id: i.id, type: 2 } },
      { id: after(1), content: "", interaction_metadata: { id: "1", type: 2 } },
      { id: String(BigInt(i.id) - 5n), content: "before" },
    ]);
    expiredTokens.add(i.token);
    expect((await post(i)).body).toEqual({ type: 5 });
    const writes = await waitFor(() => channelWrites(since).length >= 2 && channelWrites(since), 15_000, "the channel messages");
    const [search] = fake.calls.filter((c) => c.method === "GET" && c.path === "/channels/C23/messages" && c.at >= since);
    expect(Object.fromEntries(search.query)).toEqual({ after: i.id, limit: "50" });
    expect(search.headers.authorization).toBe(`Bot ${BOT_TOKEN}`);
    expect(writes[0]).toMatchObject({ method: "PATCH", path: `/channels/C23/messages/${after(2)}`, body: { content: "here is later.png" } });
    expect(writes[1]).toMatchObject({ method: "POST", path: "/channels/C23/messages" });
    expect((await fileOf(await formOf(writes[1]), "files[0]")).bytes.equals(ANSWER_FILE)).toBe(true);
    const runId = contextFor("attach later.png")[0].run_id;
    await host.waitForRun(runId);
    expect(await waitFor(async () => (await deliveryRecords(runId)).length >= 2 && deliveryRecords(runId))).toEqual([
      ["delivery.succeeded", "send"],
      ["delivery.succeeded", "send_file"],
    ]);
  });

  it("waits out a rate-limited edit of the placeholder and edits it again, rather than posting a second message beside it", async () => {
    const since = Date.now();
    const i = command("hello placeholder", { channel_id: "C24", channel: { id: "C24", type: 0 } });
    const placeholder = String(BigInt(i.id) + 2n);
    channelHistory.set("C24", [{ id: placeholder, content: "", flags: 128, interaction_metadata: { id: i.id, type: 2 } }]);
    throttledEdits.add(placeholder);
    expiredTokens.add(i.token);
    expect((await post(i)).body).toEqual({ type: 5 });
    const runId = await waitFor(() => contextFor("hello placeholder")[0]?.run_id);
    await host.waitForRun(runId);
    await waitFor(async () => (await deliveryRecords(runId)).some(([t]) => t === "delivery.succeeded"), 15_000, "the answer");
    const writes = channelWrites(since);
    expect(writes.map((w) => [w.method, w.path, w.reply?.status ?? 200])).toEqual([
      ["PATCH", `/channels/C24/messages/${placeholder}`, 429],
      ["PATCH", `/channels/C24/messages/${placeholder}`, 200],
    ]);
    expect(writes[1].at - writes[0].at).toBeGreaterThanOrEqual(250);
  });

  it("looks for the placeholder again after a rate-limited read of the channel's history, rather than posting beside it", async () => {
    const since = Date.now();
    const i = command("hello again placeholder", { channel_id: "C25", channel: { id: "C25", type: 0 } });
    const placeholder = String(BigInt(i.id) + 2n);
    channelHistory.set("C25", [{ id: placeholder, content: "", flags: 128, interaction_metadata: { id: i.id, type: 2 } }]);
    throttledHistory.add("C25");
    expiredTokens.add(i.token);
    expect((await post(i)).body).toEqual({ type: 5 });
    const runId = await waitFor(() => contextFor("hello again placeholder")[0]?.run_id);
    await host.waitForRun(runId);
    await waitFor(async () => (await deliveryRecords(runId)).some(([t]) => t === "delivery.succeeded"), 15_000, "the answer");
    const searches = fake.calls.filter((c) => c.method === "GET" && c.path === "/channels/C25/messages" && c.at >= since);
    expect(searches.map((c) => c.reply?.status ?? 200)).toEqual([429, 200]);
    expect(searches[1].at - searches[0].at).toBeGreaterThanOrEqual(250);
    expect(channelWrites(since).map((w) => [w.method, w.path, w.body?.content])).toEqual([["PATCH", `/channels/C25/messages/${placeholder}`, "echo: hello again placeholder"]]);
  });

  it("a stream whose token expires mid-way edits its message by id with the bot token and ends exactly on the final text", async () => {
    const since = Date.now();
    const i = command("stream one two three four five six", { channel_id: "C22", channel: { id: "C22", type: 0 } });
    expiringTokens.add(i.token);
    expect((await post(i)).body).toEqual({ type: 5 });
    const runId = await waitFor(() => contextFor("stream one two three four five six")[0]?.run_id);
    await host.waitForRun(runId);
    const final = "one two three four five six";
    await waitFor(() => channelWrites(since).at(-1)?.body.content === final, 15_000, "the final edit");
    // The first write resolved the deferred response; every later one edits that same message through the channel.
    expect(writesFor(i).filter((w) => w.reply?.status === undefined || w.reply.status < 300)).toHaveLength(1);
    const edits = channelWrites(since);
    expect(edits.every((w) => w.method === "PATCH" && w.path === "/channels/C22/messages/original_msg")).toBe(true);
    expect(edits.length).toBeGreaterThan(1);
    expect((await deliveryRecords(runId)).filter(([t]) => t === "delivery.failed")).toEqual([]);
  });
});

describe("Discord: answers whose “thinking…” was deleted meanwhile (discord/discord-api-docs#3087)", () => {
  it("continues in the interaction's channel with the bot token, text and files, not looking for the deleted placeholder", async () => {
    const since = Date.now();
    const i = command("attach gone.png", { channel_id: "C31", channel: { id: "C31", type: 0 } });
    deletedResponses.add(i.token);
    expect((await post(i)).body).toEqual({ type: 5 });
    const writes = await waitFor(() => channelWrites(since).length >= 2 && channelWrites(since), 15_000, "the channel messages");
    expect(writesFor(i).map((w) => [w.method, w.reply?.status])).toEqual([["PATCH", 404]]);
    expect(writes[0]).toMatchObject({ method: "POST", path: "/channels/C31/messages", body: { content: "here is gone.png", allowed_mentions: { parse: [] } } });
    expect(writes[0].headers.authorization).toBe(`Bot ${BOT_TOKEN}`);
    expect(writes[1]).toMatchObject({ method: "POST", path: "/channels/C31/messages" });
    expect((await fileOf(await formOf(writes[1]), "files[0]")).bytes.equals(ANSWER_FILE)).toBe(true);
    expect(fake.calls.filter((c) => c.method === "GET" && c.path === "/channels/C31/messages")).toEqual([]);
    const runId = contextFor("attach gone.png")[0].run_id;
    await host.waitForRun(runId);
    expect(await waitFor(async () => (await deliveryRecords(runId)).length >= 2 && deliveryRecords(runId))).toEqual([
      ["delivery.succeeded", "send"],
      ["delivery.succeeded", "send_file"],
    ]);
  });

  it("a stream whose message was deleted mid-way ends in the channel as a new message with exactly the final text", async () => {
    const since = Date.now();
    const i = command("stream alpha beta gamma delta epsilon zeta", { channel_id: "C32", channel: { id: "C32", type: 0 } });
    deletingResponses.add(i.token);
    deletedChannelMessages.add("C32/original_msg");
    expect((await post(i)).body).toEqual({ type: 5 });
    const runId = await waitFor(() => contextFor("stream alpha beta gamma delta epsilon zeta")[0]?.run_id);
    await host.waitForRun(runId);
    const final = "alpha beta gamma delta epsilon zeta";
    await waitFor(() => channelWrites(since).some((w) => w.method === "POST"), 15_000, "the answer in the channel");
    // The first write showed the draft; the response's edit was then refused (deleted), and its copy in the channel too.
    expect(writesFor(i).map((w) => [w.method, w.reply?.status ?? 200])).toEqual([
      ["PATCH", 200],
      ["PATCH", 404],
    ]);
    expect(channelWrites(since).filter((w) => w.method === "POST").map((w) => [w.path, w.body.content])).toEqual([["/channels/C32/messages", final]]);
    expect((await waitFor(async () => (await deliveryRecords(runId)).at(-1)?.[1] === "send" && deliveryRecords(runId))).filter(([t]) => t === "delivery.succeeded")).toEqual([
      ["delivery.succeeded", "send"],
      ["delivery.succeeded", "send"],
    ]);
  });
});
