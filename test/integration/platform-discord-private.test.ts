import { discordKeyPair, postInteraction } from "../support/discord-signing";
import { beforeAll, describe, expect, it } from "vitest";
import { useChatHost, type ChatHost } from "../support/chat-host";
import { fileOf, formOf, waitFor, type FakeReply, type PlatformCall } from "../support/fake-platform";
import { namedLogLines } from "../support/host";

/**
 * Discord answers that are the user's alone (a press on an ephemeral message), answers of an app installed only to the
 * user once their interaction token expired (its bot is in no channel of theirs: a DM instead), and the bot's global
 * rate limit shared by its replies.
 */
const APPLICATION_ID = "1122334455667788";
const BOT_TOKEN = "discord-bot-token-SECRET-0123456789";
/** Interaction tokens Discord no longer honours (past their 15 minutes), and ones that expire after their first write. */
const expiredTokens = new Set<string>();
const expiringTokens = new Set<string>();
/** Channels the bot is a member of: any other refuses its posts (403, Missing Access). */
const memberOf = new Set(["C1", "CG1", "CG2", "C41", "CB1", "CB2"]);
/** Users who take no DMs from the app: opening one is refused (403, 50007); or it opens, and each message in it is refused. */
const noDms = new Set(["U99"]);
const noDmMessages = new Set(["U98"]);
/** Channels whose first bot call meets the global limit (429, 1.5 s); until it resets, every bot-token call does. */
const globalTrigger = new Set<string>();
let globalUntil = 0;
let ids = 0;
/**
 * Channels whose posts name one bucket, as Discord names a route's bucket whatever channel it is in (its limit counted
 * for each channel apart): each post in CB1 spends that channel's for 4 s (one sooner is a 429); CB2's leave room.
 */
const BUCKET = "bucket-channel-messages";
let cb1ResetAt = 0;
function bucketed(channel: string): FakeReply | null {
  if (channel === "CB2") return { headers: { "x-ratelimit-bucket": BUCKET, "x-ratelimit-remaining": "4", "x-ratelimit-reset-after": "5" }, json: { id: `msg_${++ids}`, channel_id: channel } };
  if (channel !== "CB1") return null;
  const wait = cb1ResetAt - Date.now();
  const headers = { "x-ratelimit-bucket": BUCKET, "x-ratelimit-remaining": "0", "x-ratelimit-reset-after": wait > 0 ? (wait / 1000).toFixed(3) : "4" };
  if (wait > 0) return { status: 429, headers, json: { message: "You are being rate limited.", retry_after: wait / 1000, global: false } };
  cb1ResetAt = Date.now() + 4000;
  return { headers, json: { id: `msg_${++ids}`, channel_id: channel } };
}

function discordApi(call: PlatformCall): FakeReply {
  const bot = /^\/(?:channels\/([^/]+)\/messages(?:\/(.+))?|users\/@me\/channels)$/.exec(call.path);
  if (bot) {
    if (call.headers.authorization !== `Bot ${BOT_TOKEN}`) return { status: 401, json: { message: "401: Unauthorized", code: 0 } };
    const limited = { "x-ratelimit-global": "true", "x-ratelimit-scope": "global" };
    if (bot[1] && globalTrigger.delete(bot[1])) globalUntil = Date.now() + 1500;
    if (Date.now() < globalUntil) return { status: 429, headers: limited, json: { message: "You are being rate limited.", retry_after: (globalUntil - Date.now()) / 1000, global: true } };
    if (!bot[1]) {
      const user = String(call.body?.recipient_id);
      return noDms.has(user) ? { status: 403, json: { message: "Cannot send messages to this user", code: 50007 } } : { json: { id: `DM-${user}`, type: 1 } };
    }
    if (!memberOf.has(bot[1]) && !bot[1].startsWith("DM-")) return { status: 403, json: { message: "Missing Access", code: 50001 } };
    if (call.method === "GET") return { status: 403, json: { message: "Missing Access", code: 50001 } };
    if (call.method === "POST" && bot[1].startsWith("DM-") && noDmMessages.has(bot[1].slice("DM-".length))) return { status: 403, json: { message: "Cannot send messages to this user", code: 50007 } };
    if (call.method === "POST" && !bot[2]) return bucketed(bot[1]) ?? { json: { id: `msg_${++ids}`, channel_id: bot[1] } };
    if (call.method === "PATCH" && bot[2]) return { json: { id: bot[2], channel_id: bot[1] } };
    return { status: 405, json: { message: "405: Method Not Allowed", code: 0 } };
  }
  const m = /^\/webhooks\/([^/]+)\/([^/]+)(?:\/messages\/(.+))?$/.exec(call.path);
  if (!m || m[1] !== APPLICATION_ID || expiredTokens.has(m[2])) return { status: 401, json: { message: "Invalid Webhook Token", code: 50027 } };
  if (expiringTokens.delete(m[2])) expiredTokens.add(m[2]);
  if (call.method === "PATCH") return { json: { id: m[3] === "@original" ? `original_${m[2].slice(-20)}` : m[3] } };
  if (call.method === "POST") return { json: { id: `followup_${++ids}` } };
  return { status: 405, json: { message: "405: Method Not Allowed", code: 0 } };
}

const { privateKey, publicKeyHex } = discordKeyPair();
const chat = useChatHost({
  api: discordApi,
  runnerName: "discord-private",
  async ready() {
    const credentials = { application_id: APPLICATION_ID, public_key: publicKeyHex, bot_token: BOT_TOKEN };
    await chat.addBot({ platform: "discord", api_base_url: chat.fake.url, credentials }, { agentId: "discord-agent" });
  },
});
let host: ChatHost["host"];
let fake: ChatHost["fake"];
let runner: ChatHost["runner"];
let botId: string;
let webhookUrl: string;
beforeAll(() => void ({ host, fake, runner, botId, webhookUrl } = chat));

const post = (interaction: unknown) => postInteraction(webhookUrl, privateKey, interaction);

let seq = 0;
function interaction(type: number, data: Record<string, unknown>, extra: Record<string, unknown> = {}) {
  const id = `7${String(++seq).padStart(17, "0")}`;
  const channel = String(extra.channel_id ?? "C1");
  return { id, application_id: APPLICATION_ID, type, token: `interaction-token-${id}-secret`, version: 1, guild_id: "G1", channel_id: channel, channel: { id: channel, type: 0 }, member: { user: { id: "U42", username: "ada", global_name: "Ada" } }, data, ...extra };
}
const command = (question: string, extra: Record<string, unknown> = {}) => interaction(2, { id: "cmd1", name: "ask", type: 1, options: [{ name: "question", type: 3, value: question }] }, extra);
/** A pick in a string select on message `M1`: what was picked is the run's input; `flags` 64 when the message is ephemeral. */
const pick = (value: string, flags?: number, extra: Record<string, unknown> = {}) => interaction(3, { custom_id: "menu", component_type: 3, values: [value] }, { message: { id: "M1", ...(flags === undefined ? {} : { flags }) }, ...extra });
/** Installed only to the user: the bot is no member of the server. */
const userInstall = { authorizing_integration_owners: { "1": "U42" } };

const writesFor = (i: { token: string }) => fake.calls.filter((c) => c.path.startsWith(`/webhooks/${APPLICATION_ID}/${i.token}`));
const runIdOf = (i: { id: string }) => waitFor(() => runner.contexts.find((c) => c.event.event_id === `discord:${botId}:${i.id}`)?.run_id as string | undefined, 10_000, `the run of ${i.id}`);
const botCalls = (since: number) => fake.calls.filter((c) => !c.path.startsWith("/webhooks/") && c.at >= since);
const deliveries = async (runId: string) =>
  (await host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type IN ('delivery.succeeded', 'delivery.failed') ORDER BY seq", [runId])).map((r) => ({ type: r.event_type, ...JSON.parse(r.data_json) }));

describe("Discord: a press on an ephemeral message", () => {
  it("is answered for the user's eyes only: the deferred response and every follow-up, text and file, are ephemeral; a public press stays public", async () => {
    const secret = pick("long 4500", 64);
    expect((await post(secret)).body).toEqual({ type: 5, data: { flags: 64 } });
    const writes = await waitFor(() => writesFor(secret).length >= 3 && writesFor(secret), 15_000, "the answer's three parts");
    expect(writes.map((w) => w.method)).toEqual(["PATCH", "POST", "POST"]);
    expect(writes.slice(1).map((w) => w.body.flags)).toEqual([64, 64]);

    const withFile = pick("attach secret.png", 64 | 4);
    expect((await post(withFile)).body).toEqual({ type: 5, data: { flags: 64 } });
    const [, file] = await waitFor(() => writesFor(withFile).length >= 2 && writesFor(withFile), 15_000, "the file's follow-up");
    expect(JSON.parse(String((await formOf(file)).get("payload_json")))).toMatchObject({ flags: 64, attachments: [{ id: 0, filename: "secret.png" }] });

    const open = pick("long 4500");
    expect((await post(open)).body).toEqual({ type: 5 });
    const shown = await waitFor(() => writesFor(open).length >= 3 && writesFor(open), 15_000, "the public answer");
    expect(shown.slice(1).map((w) => w.body.flags)).toEqual([undefined, undefined]);
  });
});

describe("Discord: once the interaction token expired, where the bot cannot or must not post in the channel", () => {
  it("continues in a DM with the user who asked, opened with a line saying why: an app installed only to the user, and an ephemeral answer", async () => {
    for (const [i, text] of [
      [command("late for a user app", { channel_id: "C40", channel: { id: "C40", type: 0 }, ...userInstall }), "late for a user app"],
      [pick("late and private", 64, { channel_id: "C41", channel: { id: "C41", type: 0 } }), "late and private"],
    ] as const) {
      const since = Date.now();
      expiredTokens.add(i.token);
      expect((await post(i)).status).toBe(200);
      const runId = await runIdOf(i);
      await waitFor(async () => (await deliveries(runId)).length > 0, 15_000, "the answer's record");
      // Never the channel: the bot is no member there, or the answer was the user's alone.
      expect(botCalls(since).map((c) => [c.method, c.path, c.body?.recipient_id ?? c.body?.content])).toEqual([
        ["POST", "/users/@me/channels", "U42"],
        ["POST", "/channels/DM-U42/messages", "(Discord no longer lets this app answer where you asked: the answer continues here.)"],
        ["POST", "/channels/DM-U42/messages", `echo: ${text}`],
      ]);
      expect(botCalls(since).every((c) => c.headers.authorization === `Bot ${BOT_TOKEN}` && c.body.flags === undefined)).toBe(true);
      expect((await deliveries(runId)).map((d) => [d.type, d.operation])).toEqual([["delivery.succeeded", "send"]]);
    }
  });

  it("installed to the server but refused the channel (403: no View Channel or Send Messages there), continues in a DM, text and file, and asks the channel once", async () => {
    const since = Date.now();
    const i = command("attach refused.png", { channel_id: "C46", channel: { id: "C46", type: 0 }, authorizing_integration_owners: { "0": "G1" } });
    expiredTokens.add(i.token);
    await post(i);
    const runId = await runIdOf(i);
    await host.waitForRun(runId);
    const records = await waitFor(async () => ((await deliveries(runId)).length >= 2 ? deliveries(runId) : false), 15_000, "the answer's records");
    expect(records.map((d) => [d.type, d.operation])).toEqual([["delivery.succeeded", "send"], ["delivery.succeeded", "send_file"]]);
    expect(botCalls(since).map((c) => [c.method, c.path, c.reply?.status ?? 200])).toEqual([
      ["GET", "/channels/C46/messages", 403],
      ["POST", "/channels/C46/messages", 403],
      ["POST", "/users/@me/channels", 200],
      ["POST", "/channels/DM-U42/messages", 200],
      ["POST", "/channels/DM-U42/messages", 200],
      ["POST", "/channels/DM-U42/messages", 200],
    ]);
    expect(botCalls(since).slice(3, 5).map((c) => c.body.content)).toEqual(["(Discord no longer lets this app answer where you asked: the answer continues here.)", "here is refused.png"]);
    expect((await fileOf(await formOf(botCalls(since)[5]), "files[0]")).name).toBe("refused.png");

    // A stream shown in the channel before its token expired: its edits refused there, the final text goes to the DM.
    const sinceStream = Date.now();
    const s = command("stream seven eight nine ten", { channel_id: "C47", channel: { id: "C47", type: 0 } });
    expiringTokens.add(s.token);
    await post(s);
    await host.waitForRun(await runIdOf(s));
    await waitFor(() => botCalls(sinceStream).some((c) => c.path === "/channels/DM-U42/messages" && c.body?.content === "seven eight nine ten"), 15_000, "the final text in the DM");
    expect(botCalls(sinceStream).filter((c) => c.path.startsWith("/channels/C47/") && c.method === "POST")).toHaveLength(1);
  });

  it("a stream whose token expires mid-way ends in the DM on the final text, files too", async () => {
    const since = Date.now();
    const i = command("stream one two three four five six", { channel_id: "C42", channel: { id: "C42", type: 0 }, ...userInstall });
    expiringTokens.add(i.token);
    await post(i);
    const runId = await runIdOf(i);
    await host.waitForRun(runId);
    const final = "one two three four five six";
    await waitFor(() => botCalls(since).some((c) => c.body?.content === final), 15_000, "the final text in the DM");
    // The message shown before the token expired cannot be edited by the bot: the final text is posted in the DM.
    expect(botCalls(since).every((c) => c.path === "/users/@me/channels" || c.path.startsWith("/channels/DM-U42/"))).toBe(true);
    expect(writesFor(i).filter((w) => (w.reply?.status ?? 200) < 300)).toHaveLength(1);

    const file = command("attach late.png", { channel_id: "C42", channel: { id: "C42", type: 0 }, ...userInstall });
    expiredTokens.add(file.token);
    const sinceFile = Date.now();
    await post(file);
    const form = await waitFor(() => botCalls(sinceFile).find((c) => String(c.headers["content-type"]).startsWith("multipart/")), 15_000, "the file in the DM");
    expect(form.path).toBe("/channels/DM-U42/messages");
    expect((await fileOf(await formOf(form), "files[0]")).name).toBe("late.png");
  });

  it("records a DM the user takes no part in, once asked, with why, and logs it; no part asks again", async () => {
    const since = Date.now();
    const i = command("long 4500", { channel_id: "C43", channel: { id: "C43", type: 0 }, member: { user: { id: "U99", username: "bo" } }, ...userInstall });
    expiredTokens.add(i.token);
    await post(i);
    const runId = await runIdOf(i);
    await host.waitForRun(runId);
    const failed = await waitFor(async () => {
      const rows = (await deliveries(runId)).filter((d) => d.type === "delivery.failed");
      return rows.length >= 3 && rows;
    }, 15_000, "each part's refusal");
    expect(failed.every((d) => d.code === "discord_dm_refused" && d.will_retry === false)).toBe(true);
    expect(failed[0].error).toMatch(/token expired .*refused a direct message to the user: Cannot send messages to this user/);
    expect(botCalls(since).map((c) => [c.method, c.path])).toEqual([["POST", "/users/@me/channels"]]);
    expect(namedLogLines(host.logs(), "delivery.failed")).toContainEqual(expect.objectContaining({ run_id: runId, code: "discord_dm_refused" }));
  });

  it("labels discord_dm_refused only Discord's 'cannot send messages to this user' (50007), opening the DM or in it; a revoked bot token keeps Discord's own code", async () => {
    const failures = async (runId: string, parts: number) =>
      waitFor(async () => {
        const rows = (await deliveries(runId)).filter((d) => d.type === "delivery.failed");
        return rows.length >= parts && rows;
      }, 15_000, "each part's refusal");
    // The DM opens, but Discord refuses its first message (50007): the user takes none from the app.
    const since = Date.now();
    const refused = command("long 4500", { channel_id: "C44", channel: { id: "C44", type: 0 }, member: { user: { id: "U98", username: "cy" } }, ...userInstall });
    expiredTokens.add(refused.token);
    await post(refused);
    const refusedRun = await runIdOf(refused);
    await host.waitForRun(refusedRun);
    expect((await failures(refusedRun, 3)).every((d) => d.code === "discord_dm_refused" && d.will_retry === false)).toBe(true);
    expect(botCalls(since).map((c) => [c.method, c.path])).toEqual([["POST", "/users/@me/channels"], ["POST", "/channels/DM-U98/messages"]]);

    // The bot's token revoked: Discord's 401 is no word on the user, and is recorded as Discord gave it (asked once all the same).
    const revoked = await host.admin("POST", "/v1/admin/bots", { platform: "discord", api_base_url: fake.url, credentials: { application_id: APPLICATION_ID, public_key: publicKeyHex, bot_token: "revoked-bot-token-0123456789" } });
    expect(revoked.status).toBe(201);
    await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "discord-agent-revoked", scope: { type: "bot", id: revoked.body.bot_id } });
    const sinceRevoked = Date.now();
    const i = command("long 4500", { channel_id: "C45", channel: { id: "C45", type: 0 }, ...userInstall });
    expiredTokens.add(i.token);
    expect((await postInteraction(revoked.body.webhook_url, privateKey, i)).status).toBe(200);
    const runId = await waitFor(() => runner.contexts.find((c) => c.event.event_id === `discord:${revoked.body.bot_id}:${i.id}`)?.run_id as string | undefined, 10_000, "the run");
    await host.waitForRun(runId);
    const failed = await failures(runId, 3);
    expect(failed.map((d) => [d.code, d.will_retry])).toEqual(failed.map(() => ["discord_http_401", false]));
    expect(failed[0].error).toMatch(/refused a direct message to the user: 401: Unauthorized/);
    expect(botCalls(sinceRevoked).map((c) => [c.method, c.path, c.reply?.status])).toEqual([["POST", "/users/@me/channels", 401]]);
    expect(namedLogLines(host.logs(), "delivery.failed")).toContainEqual(expect.objectContaining({ run_id: runId, code: "discord_http_401", status: 401 }));
  });

  it("a reply queued by the previous release (its target names no user) continues in the channel as it did then; an ephemeral one has nowhere to go", async () => {
    // An interaction with no user is stored as that release stored every target: without `userId`.
    const since = Date.now();
    const old = command("queued before the DM", { channel_id: "C1", channel: { id: "C1", type: 0 }, member: undefined, ...userInstall });
    expiredTokens.add(old.token);
    await post(old);
    const runId = await runIdOf(old);
    await waitFor(async () => (await deliveries(runId)).length > 0, 15_000, "the answer's record");
    expect((await deliveries(runId)).map((d) => [d.type, d.operation, d.code])).toEqual([["delivery.succeeded", "send", undefined]]);
    // As then: the placeholder sought in the channel's history (refused here), then a new message there.
    expect(botCalls(since).map((c) => [c.method, c.path, c.body?.content])).toEqual([
      ["GET", "/channels/C1/messages", undefined],
      ["POST", "/channels/C1/messages", "echo: queued before the DM"],
    ]);

    const sincePrivate = Date.now();
    const secret = pick("queued and private", 64, { channel_id: "C1", channel: { id: "C1", type: 0 }, member: undefined });
    expiredTokens.add(secret.token);
    await post(secret);
    const secretRun = await runIdOf(secret);
    const [failed] = await waitFor(async () => {
      const rows = (await deliveries(secretRun)).filter((d) => d.type === "delivery.failed");
      return rows.length > 0 && rows;
    }, 15_000, "the answer's refusal");
    expect(failed.code).toBe("discord_interaction_expired");
    expect(botCalls(sincePrivate)).toEqual([]);
  });
});

describe("Discord: the bot's rate limits, shared by its replies", () => {
  it("a global 429 one reply met holds the other replies' calls under the bot token until it resets, rather than meeting 429s of their own", async () => {
    const first = command("first of two", { channel_id: "CG1", channel: { id: "CG1", type: 0 } });
    const second = command("second of two", { channel_id: "CG2", channel: { id: "CG2", type: 0 } });
    expiredTokens.add(first.token);
    expiredTokens.add(second.token);
    globalTrigger.add("CG1");
    const since = Date.now();
    await post(first);
    const limited = await waitFor(() => botCalls(since).find((c) => c.reply?.status === 429), 15_000, "the first reply's 429");
    await post(second);
    const answered = await waitFor(() => {
      const posts = botCalls(since).filter((c) => c.method === "POST" && (c.reply?.status ?? 200) < 300);
      return posts.length >= 2 && posts;
    }, 15_000, "both answers");
    expect(answered.map((c) => c.body.content).sort()).toEqual(["echo: first of two", "echo: second of two"]);
    // One 429 in all: the second reply waited out the global limit (1.5 s) its first call would have met.
    expect(botCalls(since).filter((c) => c.reply?.status === 429)).toEqual([limited]);
    const secondCalls = botCalls(since).filter((c) => c.path.startsWith("/channels/CG2/"));
    expect(secondCalls[0].at - limited.at).toBeGreaterThanOrEqual(1400);
  });

  it("a bucket one channel spent holds that channel's next post, never another channel's: Discord names the bucket alike, but counts it per channel", async () => {
    const channelOf = (id: string) => ({ channel_id: id, channel: { id, type: 0 } });
    const posts = (channel: string, since: number) => botCalls(since).filter((c) => c.method === "POST" && c.path === `/channels/${channel}/messages`);
    const late = (text: string, channel: string) => {
      const i = command(text, channelOf(channel));
      expiredTokens.add(i.token);
      return i;
    };
    const since = Date.now();
    // CB2's route is known to share the bucket's name; then CB1 spends its own (4 s).
    await post(late("warm CB2", "CB2"));
    await waitFor(() => posts("CB2", since).length >= 1, 15_000, "CB2's first answer");
    await post(late("spend CB1", "CB1"));
    const [spent] = await waitFor(() => posts("CB1", since).length >= 1 && posts("CB1", since), 15_000, "CB1's answer");
    await post(late("next in CB2", "CB2"));
    await post(late("next in CB1", "CB1"));
    const other = await waitFor(() => posts("CB2", since).find((c) => c.body.content === "echo: next in CB2"), 15_000, "CB2's second answer");
    // Not held for CB1's reset: CB2's bucket had room.
    expect(other.at - spent.at).toBeLessThan(2000);
    // CB1's own next post waits for its reset, and meets no 429.
    const same = await waitFor(() => posts("CB1", since).find((c) => c.body.content === "echo: next in CB1"), 15_000, "CB1's second answer");
    expect(same.at - spent.at).toBeGreaterThanOrEqual(3900);
    expect(posts("CB1", since).filter((c) => c.reply?.status === 429)).toEqual([]);
  });
});
