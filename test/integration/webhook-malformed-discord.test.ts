/**
 * Discord interactions signed with the application's key but not of the shape Discord documents: each is answered
 * 200 within its 3 s (Discord never retries, and shows the user an error otherwise) and recorded with its payload for
 * the operator, or refused with a clear 4xx when it cannot be read at all; never a 500, never an unhandled error in
 * the Worker's log.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { startChatRunner, startFakePlatform, waitFor } from "../support/fake-platform";
import { discordKeyPair, discordSignature } from "../support/discord-signing";
import { deliver, expectEachHandled, expectHandled, INVALID_JSON, nestedJson, type MalformedRow } from "../support/malformed-webhooks";

const APPLICATION_ID = "515151515151";
const BOT_TOKEN = "malformed-discord-bot-token-0123";
const INTERACTION_TOKEN = "malformed-interaction-token-abcdef";
const SECRETS = [BOT_TOKEN, INTERACTION_TOKEN];
const key = discordKeyPair();

let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startChatRunner>>;
let bot: { botId: string; url: string };
let messageId = 0;

beforeAll(async () => {
  fake = await startFakePlatform(() => ({ json: { id: `msg-${++messageId}` } }));
  runner = await startChatRunner("malformed-discord");
  host = await startTestHost({ captureLogs: true });
  const created = await host.admin("POST", "/v1/admin/bots", { platform: "discord", api_base_url: fake.url, credentials: { application_id: APPLICATION_ID, public_key: key.publicKeyHex, bot_token: BOT_TOKEN } });
  expect(created.status).toBe(201);
  bot = { botId: created.body.bot_id, url: created.body.webhook_url };
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "malformed-discord-agent", scope: { type: "bot", id: bot.botId } });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

const post = (body: string) => () => fetch(bot.url, { method: "POST", headers: { "content-type": "application/json", ...discordSignature(body, key.privateKey) }, body });

let n = 900_000;
/** Ada's `/ask q: hi` in channel 4242 of guild 77, but for the fields given. */
const command = (fields: Record<string, unknown>) =>
  JSON.stringify({
    id: String(++n),
    application_id: APPLICATION_ID,
    type: 2,
    token: INTERACTION_TOKEN,
    version: 1,
    channel_id: "4242",
    guild_id: "77",
    member: { user: { id: "42", username: "ada" }, nick: null },
    data: { id: "cmd1", name: "ask", type: 1, options: [{ name: "q", type: 3, value: "hi" }] },
    ...fields,
  });

/** The payload as stored: its interaction token left out. */
function withoutToken(body: string): unknown {
  const payload = JSON.parse(body);
  if (payload && typeof payload === "object") delete payload.token;
  return payload;
}

const rows: MalformedRow[] = [
  { name: "a JSON null", body: () => "null" },
  { name: "a JSON array", body: () => "[]" },
  { name: "id a number", body: () => command({ id: 5 }) },
  { name: "type a string", body: () => command({ type: "2" }) },
  { name: "a type nobody knows", body: () => command({ type: 99 }) },
  { name: "data a string", body: () => command({ data: "x" }) },
  { name: "options holding null", body: () => command({ data: { name: "ask", type: 1, options: [null, { name: 5 }] } }) },
  { name: "a component press of wrong types", body: () => command({ type: 3, data: { custom_id: 5, component_type: "x", values: [null] }, message: { id: 5, flags: "x" } }) },
  { name: "a modal of wrong types", body: () => command({ type: 5, data: { custom_id: "m", components: [null, { components: 5 }] } }) },
  { name: "a message command naming a message of wrong types", body: () => command({ data: { name: "m", type: 3, target_id: "M9", resolved: { messages: { M9: { id: "M9", content: 5, author: "x", attachments: [null] } } } } }) },
  { name: "option words with a lone surrogate, a NUL and an RTL override", body: () => command({ data: { name: "ask", type: 1, options: [{ name: "q", type: 3, value: "\ud800\u0000\u202e words" }] } }), as: ["message.received", "APPLICATION_COMMAND"] },
  { name: "option words of 600,000 characters", body: () => command({ data: { name: "ask", type: 1, options: [{ name: "q", type: 3, value: "q".repeat(600_000) }] } }) },
  // Null where Discord would leave a field out: read as left out, so the command still runs.
  { name: "guild_id, channel, user, message and owners null", body: () => command({ guild_id: null, channel: null, user: null, message: null, authorizing_integration_owners: null }), as: ["message.received", "APPLICATION_COMMAND"] },
  { name: "the member's username and bot flag null", body: () => command({ member: { user: { id: "42", username: null, bot: null, global_name: null }, nick: null } }), as: ["message.received", "APPLICATION_COMMAND"] },
  { name: "data's options and resolved null", body: () => command({ data: { id: "cmd1", name: "ask", type: 1, options: null, resolved: null, custom_id: null } }), as: ["message.received", "APPLICATION_COMMAND"] },
  { name: "a channel id with a lone surrogate", body: () => command({ channel_id: "42\ud800" }), as: ["platform.unhandled", "APPLICATION_COMMAND.unusable_id"] },
  { name: "a thread whose parent channel id has a NUL", body: () => command({ channel_id: "T1", channel: { id: "T1", type: 11, parent_id: "42\u0000" } }), as: ["platform.unhandled", "APPLICATION_COMMAND.unusable_id"] },
  { name: "options nested 5,000 levels deep", body: () => command({ data: { name: "a", options: "@@" } }).replace('"@@"', `${'[{"name":"s","type":1,"options":'.repeat(5000)}[]${"}]".repeat(5000)}`), refused: INVALID_JSON },
  { name: "a field nested 50,000 levels deep", body: () => command({ x: "@@" }).replace('"@@"', nestedJson(50_000)), refused: INVALID_JSON },
  { name: "a body cut short", body: () => command({}).slice(0, 40), refused: INVALID_JSON },
];

describe("Discord: a signed interaction of the wrong shape", () => {
  it("is acknowledged 200 and recorded with its payload, or refused 400 when it cannot be read; never a 500", async () => {
    await expectEachHandled(host, bot.botId, rows, { send: (body) => post(body), secrets: SECRETS, stored: (body) => withoutToken(body) });
  });

  it("an interaction token with a lone surrogate is answered through the API like any other, not lost to an exception", async () => {
    const body = command({ token: "tok\ud800en", data: { name: "ask", type: 1, options: [{ name: "q", type: 3, value: "odd token" }] } });
    const d = await deliver(host, bot.botId, post(body));
    expectHandled(d, SECRETS);
    expect(JSON.parse(d.text)).toEqual({ type: 5 });
    // The answer edits the "thinking…" by the token: Discord (here, the fake) is asked, and answers for a token it knows or not.
    await waitFor(() => fake.calls.find((c) => c.path.startsWith(`/webhooks/${APPLICATION_ID}/tok\ufffden/`)), 10_000, "the answer's call by the token");
    expect(host.logs()).not.toMatch(/URI malformed/);
  });
});
