import { generateKeyPairSync, sign as edSign, type KeyObject } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { startChatRunner, startFakePlatform, waitFor, type FakeReply, type PlatformCall } from "../support/fake-platform";

/**
 * README "Chat platforms" (Discord): once Discord refuses the interaction
 * token before the first answer, "the first answer replaces the “thinking…”
 * placeholder, found in the channel's history by its interaction"; and
 * "rate limits wait what the platform asks". Here the placeholder is found,
 * but its first edit is rate limited (429, retry_after 0.3 s).
 */
const APPLICATION_ID = "1122334455667788";
const BOT_TOKEN = "discord-bot-token-SECRET-0123456789";
const history = new Map<string, Record<string, unknown>[]>();
/** Channel message ids whose first edit the fake answers 429. */
const throttledEdits = new Set<string>();
let channelMessages = 0;

let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startChatRunner>>;
let privateKey: KeyObject;
let webhookUrl: string;

function discordApi(call: PlatformCall): FakeReply {
  const ch = /^\/channels\/([^/]+)\/messages(?:\/(.+))?$/.exec(call.path);
  if (ch) {
    if (call.headers.authorization !== `Bot ${BOT_TOKEN}`) return { status: 401, json: { message: "401: Unauthorized", code: 0 } };
    if (call.method === "GET" && !ch[2]) return { json: (history.get(ch[1]) ?? []).filter((m) => BigInt(String(m.id)) > BigInt(call.query.get("after") ?? "0")) };
    if (call.method === "POST" && !ch[2]) return { json: { id: `channel_msg_${++channelMessages}`, channel_id: ch[1], content: call.body?.content } };
    if (call.method === "PATCH" && ch[2]) {
      if (throttledEdits.delete(ch[2])) return { status: 429, headers: { "retry-after": "1" }, json: { message: "You are being rate limited.", retry_after: 0.3, global: false } };
      return { json: { id: ch[2], channel_id: ch[1], content: call.body?.content } };
    }
    return { status: 405, json: { message: "405: Method Not Allowed", code: 0 } };
  }
  // Every interaction token is past its 15 minutes.
  return { status: 401, json: { message: "Invalid Webhook Token", code: 50027 } };
}

beforeAll(async () => {
  const pair = generateKeyPairSync("ed25519");
  privateKey = pair.privateKey;
  const publicKeyHex = pair.publicKey.export({ type: "spki", format: "der" }).subarray(-32).toString("hex");
  fake = await startFakePlatform(discordApi);
  runner = await startChatRunner("discord-placeholder");
  host = await startTestHost();
  const created = await host.admin("POST", "/v1/admin/bots", { platform: "discord", api_base_url: fake.url, credentials: { application_id: APPLICATION_ID, public_key: publicKeyHex, bot_token: BOT_TOKEN } });
  expect(created.status).toBe(201);
  webhookUrl = created.body.webhook_url;
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "discord-agent", scope: { type: "bot", id: created.body.bot_id } });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

async function post(interaction: unknown) {
  const body = JSON.stringify(interaction);
  const timestamp = String(Math.floor(Date.now() / 1000));
  const signature = edSign(null, Buffer.from(timestamp + body), privateKey).toString("hex");
  const res = await fetch(webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-signature-timestamp": timestamp, "x-signature-ed25519": signature }, body });
  return { status: res.status, body: await res.json() };
}

describe("Discord: the placeholder's first edit is rate limited", () => {
  it("waits and replaces the placeholder it found, rather than posting a second message beside it", async () => {
    const id = "900000000000000077";
    const placeholderId = String(BigInt(id) + 2n);
    history.set("C77", [{ id: placeholderId, content: "", flags: 128, interaction_metadata: { id, type: 2 } }]);
    throttledEdits.add(placeholderId);
    const i = {
      id,
      application_id: APPLICATION_ID,
      type: 2,
      token: `interaction-token-${id}-secret`,
      version: 1,
      guild_id: "G1",
      channel_id: "C77",
      channel: { id: "C77", type: 0 },
      member: { user: { id: "U42", username: "ada", global_name: "Ada" } },
      data: { id: "cmd1", name: "ask", type: 1, options: [{ name: "question", type: 3, value: "hello placeholder" }] },
    };
    expect(await post(i)).toEqual({ status: 200, body: { type: 5 } });
    const channelWrites = () => fake.calls.filter((c) => c.path.startsWith("/channels/C77/") && c.method !== "GET");
    // The answer lands somewhere: the placeholder edited, or a new message.
    await waitFor(() => channelWrites().length >= 2, 15_000, "the answer");
    await new Promise((r) => setTimeout(r, 1500));
    const writes = channelWrites().map((c) => `${c.method} ${c.path}`);
    // Expected: the 429'd edit of the placeholder, then (after retry_after) the same edit again; no new message.
    expect(writes).toEqual([`PATCH /channels/C77/messages/${placeholderId}`, `PATCH /channels/C77/messages/${placeholderId}`]);
  });
});
