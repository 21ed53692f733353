import { sign as edSign } from "node:crypto";
import { expect } from "vitest";
import { useChatHost } from "./chat-host";
import { discordKeyPair } from "./discord-signing";
import { waitFor, type FakeReply, type PlatformCall } from "./fake-platform";

/**
 * The set-up the platform-discord*.test.ts files share: a fake Discord API (its refusals driven by the tokens, channels
 * and maps returned) and a host with one bot bound to a chat runner, channel C7's agent speaking Chinese. Call it once
 * at a file's top level: it registers the file's beforeAll and afterAll, and each call has its own state.
 */
export function useDiscordPlatform(hostOptions: { storageDrill?: boolean } = {}) {
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

  const { privateKey, publicKeyHex } = discordKeyPair();
  let followups = 0;

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

  const chatHost = useChatHost({
    api: discordApi,
    runnerName: "discord-chat",
    hostOptions,
    secrets: [BOT_TOKEN, /interaction-token-\d+-secret/],
    async ready() {
      const { host, runner } = chatHost;
      await chatHost.addBot({ platform: "discord", api_base_url: chatHost.fake.url, credentials: { application_id: APPLICATION_ID, public_key: publicKeyHex, bot_token: BOT_TOKEN } }, { agentId: "discord-agent" });
      // One channel's agent speaks Chinese.
      const zh = { agent_id: "discord-zh", name: "zh", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: "C7" }, delivery_policy: { failure_notice: "抱歉，这次没能回答。" } };
      expect((await host.admin("POST", "/v1/admin/agents", zh)).status).toBe(201);
    },
  });
  const { answered } = chatHost;

  async function postRaw(body: string, headers: Record<string, string>) {
    const res = await fetch(chatHost.webhookUrl, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });
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

  const writesFor = (i: { token: string }) => chatHost.fake.calls.filter((c) => c.path.startsWith(`/webhooks/${APPLICATION_ID}/${i.token}`));
  const runOf = (i: { id: string }) => waitFor(() => chatHost.runner.contexts.find((c) => c.event.event_id === `discord:${chatHost.botId}:${i.id}`), 10_000, `the run of interaction ${i.id}`);

  return Object.assign(chatHost, {
    privateKey, publicKeyHex,
    APPLICATION_ID, BOT_TOKEN, FILE, throttledTokens, expiredTokens, expiringTokens, channelHistory, gatewayTimeouts, throttledEdits, throttledHistory,
    userInstallTokens, followupsOf, bucketedTokens, bucketResetAt, deletedResponses, deletingResponses, deletedChannelMessages,
    postRaw, signed, post, interaction, command, writesFor, runOf,
  });
}
export type DiscordPlatform = ReturnType<typeof useDiscordPlatform>;
