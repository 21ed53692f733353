import { createHmac, generateKeyPairSync, sign as edSign, type KeyObject } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { startChatRunner, startFakePlatform, waitFor, type FakeReply, type PlatformCall } from "../support/fake-platform";

const SLACK_BOT_TOKEN = "xoxb-TEST-slack-bot-token-1234567890";
const SIGNING_SECRET = "slack-signing-secret-0123456789abcdef";
const APPLICATION_ID = "1122334455667788";
const DISCORD_BOT_TOKEN = "discord-bot-token-SECRET-0123456789";

let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startChatRunner>>;
let slackBot: { id: string; url: string };
let discordBot: { id: string; url: string };
let privateKey: KeyObject;
let ts = 1_700_000_000;

function api(call: PlatformCall): FakeReply {
  if (call.path === "/chat.postMessage") return { json: { ok: true, channel: call.body.channel, ts: `${++ts}.000100` } };
  if (call.path === "/chat.update") return { json: { ok: true, channel: call.body.channel, ts: call.body.ts } };
  if (call.path === "/files/F1/notes.txt") return { bytes: new Uint8Array([1, 2, 3]), headers: { "content-type": "text/plain" } };
  const m = /^\/webhooks\/([^/]+)\/([^/]+)(?:\/messages\/(.+))?$/.exec(call.path);
  if (m && call.method === "PATCH") return { json: { id: "original_msg", content: call.body?.content } };
  if (m && call.method === "POST") return { json: { id: "followup", content: call.body?.content } };
  return { status: 404, json: { ok: false, error: "unknown_method" } };
}

beforeAll(async () => {
  fake = await startFakePlatform(api);
  runner = await startChatRunner("payload-edges-chat");
  host = await startTestHost();
  const s = await host.admin("POST", "/v1/admin/bots", { platform: "slack", api_base_url: fake.url, credentials: { bot_token: SLACK_BOT_TOKEN, signing_secret: SIGNING_SECRET } });
  expect(s.status).toBe(201);
  slackBot = { id: s.body.bot_id, url: s.body.webhook_url };
  const pair = generateKeyPairSync("ed25519");
  privateKey = pair.privateKey;
  const publicKeyHex = pair.publicKey.export({ type: "spki", format: "der" }).subarray(-32).toString("hex");
  const d = await host.admin("POST", "/v1/admin/bots", { platform: "discord", api_base_url: fake.url, credentials: { application_id: APPLICATION_ID, public_key: publicKeyHex, bot_token: DISCORD_BOT_TOKEN } });
  expect(d.status).toBe(201);
  discordBot = { id: d.body.bot_id, url: d.body.webhook_url };
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "edges-slack", scope: { type: "bot", id: slackBot.id } });
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "edges-discord", scope: { type: "bot", id: discordBot.id } });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

async function slackPost(payload: unknown) {
  const body = JSON.stringify(payload);
  const timestamp = Math.floor(Date.now() / 1000);
  const signature = `v0=${createHmac("sha256", SIGNING_SECRET).update(`v0:${timestamp}:${body}`).digest("hex")}`;
  const res = await fetch(slackBot.url, { method: "POST", headers: { "content-type": "application/json", "x-slack-request-timestamp": String(timestamp), "x-slack-signature": signature }, body });
  return { status: res.status, text: await res.text() };
}
let eventSeq = 0;
const callback = (event: Record<string, unknown>) => ({ token: "legacy", team_id: "T1", api_app_id: "A1", type: "event_callback", event_id: `EvEdge${++eventSeq}`, event_time: Math.floor(Date.now() / 1000), event });

async function discordPost(interaction: unknown) {
  const body = JSON.stringify(interaction);
  const timestamp = String(Math.floor(Date.now() / 1000));
  const sig = edSign(null, Buffer.from(timestamp + body), privateKey).toString("hex");
  const res = await fetch(discordBot.url, { method: "POST", headers: { "content-type": "application/json", "x-signature-timestamp": timestamp, "x-signature-ed25519": sig }, body });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

describe("Slack: a person's message whose payload names bot_id as null", () => {
  // Slack has sent user file uploads as `"bot_id": null` (botkit#1372 shows such a payload): a person, not a bot.
  it("runs it like any message from a person, instead of recording it as unhandled", async () => {
    const ev = callback({
      type: "message",
      subtype: "file_share",
      channel: "C-NULLBOT",
      channel_type: "channel",
      user: "U42",
      text: "please read this",
      upload: true,
      display_as_bot: false,
      bot_id: null,
      ts: "1800000001.000100",
      files: [{ id: "F1", name: "notes.txt", mimetype: "text/plain", url_private_download: `${fake.url}/files/F1/notes.txt` }],
    });
    expect((await slackPost(ev)).status).toBe(200);
    // Whatever it became, it is recorded under the envelope's or the message's key before the 200.
    const rows = await host.query<{ event_type: string; source_event_type: string; conversation_id: string | null }>(
      "SELECT event_type, source_event_type, conversation_id FROM event_log WHERE event_id IN (?, ?)",
      [`slack:${slackBot.id}:${ev.event_id}`, `slack:${slackBot.id}:msg:C-NULLBOT:1800000001.000100`],
    );
    expect(rows).toEqual([{ event_type: "message.received", source_event_type: "message", conversation_id: "C-NULLBOT" }]);
  });
});

describe("Discord: a message context-menu command (Apps → command on a message)", () => {
  // An APPLICATION_COMMAND of data.type 3 carries the message it was used on in data.target_id / data.resolved.messages.
  it("gives the runner the message the command was used on", async () => {
    const id = "900000000000000777";
    const interaction = {
      id,
      application_id: APPLICATION_ID,
      type: 2,
      token: `interaction-token-${id}-secret`,
      version: 1,
      guild_id: "G1",
      channel_id: "C-CTX",
      channel: { id: "C-CTX", type: 0 },
      member: { user: { id: "U42", username: "ada", global_name: "Ada" } },
      data: {
        id: "cmd-ctx",
        name: "Summarize",
        type: 3,
        target_id: "M-TARGET-1",
        resolved: { messages: { "M-TARGET-1": { id: "M-TARGET-1", channel_id: "C-CTX", content: "The quarterly numbers are up 12% over last year.", author: { id: "U7", username: "bob" } } } },
      },
    };
    expect((await discordPost(interaction)).body).toEqual({ type: 5 });
    const ctx = await waitFor(() => runner.contexts.find((c) => c.conversation.conversation_id === "C-CTX"), 15_000, "the run");
    // The message is what the user means: its words are the input, the command says which message and whose.
    expect(ctx.input.text).toBe("The quarterly numbers are up 12% over last year.");
    expect(ctx.event.data.command).toEqual({
      name: "Summarize",
      path: [],
      options: {},
      target: { type: "message", id: "M-TARGET-1", content: "The quarterly numbers are up 12% over last year.", author_id: "U7", author_name: "bob" },
    });
  });

  it("names the user a user command was used on", async () => {
    const id = "900000000000000778";
    const interaction = {
      id,
      application_id: APPLICATION_ID,
      type: 2,
      token: `interaction-token-${id}-secret`,
      version: 1,
      guild_id: "G1",
      channel_id: "C-CTX-USER",
      member: { user: { id: "U42", username: "ada", global_name: "Ada" } },
      data: { id: "cmd-user", name: "Profile", type: 2, target_id: "U7", resolved: { users: { U7: { id: "U7", username: "bob", global_name: null } } } },
    };
    expect((await discordPost(interaction)).body).toEqual({ type: 5 });
    const ctx = await waitFor(() => runner.contexts.find((c) => c.conversation.conversation_id === "C-CTX-USER"), 15_000, "the run");
    expect({ text: ctx.input.text, target: ctx.event.data.command.target }).toEqual({ text: "/Profile", target: { type: "user", id: "U7", name: "bob" } });
  });
});

describe("Slack: a /me message", () => {
  // `subtype: "me_message"` is a person's words ("/me is stuck on the deploy"), not a bot's or a system notice.
  it("reaches the agent like any other message a person types", async () => {
    const ev = callback({ type: "message", subtype: "me_message", channel: "C-ME", channel_type: "channel", user: "U42", text: "is stuck on the deploy", ts: "1800000002.000100" });
    expect((await slackPost(ev)).status).toBe(200);
    const rows = await host.query<{ event_type: string }>("SELECT event_type FROM event_log WHERE event_id IN (?, ?)", [`slack:${slackBot.id}:${ev.event_id}`, `slack:${slackBot.id}:msg:C-ME:1800000002.000100`]);
    expect(rows.map((r) => r.event_type)).toEqual(["message.received"]);
  });
});
