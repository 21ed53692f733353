/**
 * A platform (or the proxy at a bot's api_base_url) whose error answer quotes the request: its URL or its
 * Authorization header. The delivery trail keeps the platform's error text (delivery.failed `error`), scrubbed
 * of the bot's stored credentials only (src/delivery/records.ts). The credentials a reply is actually sent
 * with also include ones derived per event or per app: Discord's interaction token (in the URL path; the host
 * treats it as a credential: src/platforms/discord/api.ts, raw payloads drop it, ctx.delivery omits it) and
 * Lark's tenant access token (Authorization). EventLog records are readable by operators and by runners
 * (event.page), so neither may be stored there; nor may the log line a reply given up on gets. A quoted URL carries
 * a credential percent-encoded (Telegram's bot token, in its path): that form is scrubbed too.
 */
import { generateKeyPairSync, sign as edSign } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { namedLogLines, startTestHost, type TestHost } from "../support/host";
import { sayOnTelegram, startChatRunner, startFakePlatform, waitFor, type FakeReply, type PlatformCall } from "../support/fake-platform";

const APPLICATION_ID = "2233445566778899";
const DISCORD_BOT_TOKEN = "discord-bot-token-ECHO-0123456789";
const INTERACTION_TOKEN = "aW50ZXJhY3Rpb246ECHO-interaction-token-0123456789";
const APP_ID = "cli_echo_app_0001";
const APP_SECRET = "lark-app-secret-echo-0123456789";
const VERIFICATION_TOKEN = "lark-verification-token-echo-01";
const TENANT_TOKEN = "t-echo-tenant-access-token-0123456789";
const TELEGRAM_TOKEN = "123456:ECHO-telegram-bot-token-0123456789";
const TELEGRAM_SECRET = "tg-echo-secret-token-0123";

let host: TestHost;
let discord: Awaited<ReturnType<typeof startFakePlatform>>;
let lark: Awaited<ReturnType<typeof startFakePlatform>>;
let telegram: Awaited<ReturnType<typeof startFakePlatform>>;
let telegramWebhook: string;
let runner: Awaited<ReturnType<typeof startChatRunner>>;
let discordWebhook: string;
let larkWebhook: string;
let privateKey: ReturnType<typeof generateKeyPairSync>["privateKey"];

/** Refuses every write, quoting what it was asked. */
const discordApi = (call: PlatformCall): FakeReply => ({ status: 400, json: { message: `Invalid request: ${call.method} ${call.path}`, code: 0 } });
function larkApi(call: PlatformCall): FakeReply {
  if (call.path === "/open-apis/auth/v3/tenant_access_token/internal") return { json: { code: 0, msg: "ok", tenant_access_token: TENANT_TOKEN, expire: 7200 } };
  return { status: 400, json: { code: 99992402, msg: `field validation failed: authorization=${call.headers.authorization}` } };
}

/** Refuses every send, quoting the URL it was called at as a proxy's log writes it: percent-encoded. */
const telegramApi = (call: PlatformCall): FakeReply => ({ status: 400, json: { ok: false, error_code: 400, description: `Bad Request: chat not found (POST ${call.path.replace(TELEGRAM_TOKEN, encodeURIComponent(TELEGRAM_TOKEN))})` } });

beforeAll(async () => {
  const pair = generateKeyPairSync("ed25519");
  privateKey = pair.privateKey;
  const publicKeyHex = pair.publicKey.export({ type: "spki", format: "der" }).subarray(-32).toString("hex");
  discord = await startFakePlatform(discordApi);
  lark = await startFakePlatform(larkApi);
  telegram = await startFakePlatform(telegramApi);
  runner = await startChatRunner("echo-errors");
  host = await startTestHost({ captureLogs: true });
  const d = await host.admin("POST", "/v1/admin/bots", { platform: "discord", api_base_url: discord.url, credentials: { application_id: APPLICATION_ID, public_key: publicKeyHex, bot_token: DISCORD_BOT_TOKEN } });
  expect(d.status).toBe(201);
  discordWebhook = d.body.webhook_url;
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "echo-discord", scope: { type: "bot", id: d.body.bot_id } });
  const l = await host.admin("POST", "/v1/admin/bots", { platform: "lark", api_base_url: lark.url, credentials: { app_id: APP_ID, app_secret: APP_SECRET, verification_token: VERIFICATION_TOKEN } });
  expect(l.status).toBe(201);
  larkWebhook = l.body.webhook_url;
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "echo-lark", scope: { type: "bot", id: l.body.bot_id } });
  const t = await host.admin("POST", "/v1/admin/bots", { platform: "telegram", api_base_url: telegram.url, credentials: { bot_token: TELEGRAM_TOKEN, secret_token: TELEGRAM_SECRET } });
  expect(t.status).toBe(201);
  telegramWebhook = t.body.webhook_url;
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "echo-telegram", scope: { type: "bot", id: t.body.bot_id } });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await discord?.close();
  await lark?.close();
  await telegram?.close();
});

async function deliveryFailures(runId: string) {
  const run = await host.waitForRun(runId);
  expect(run.status).toBe("completed");
  return waitFor(async () => {
    const rows = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE run_id = ? AND event_type = 'delivery.failed'", [runId]);
    return rows.length > 0 && rows.map((r) => r.data_json).join("\n");
  }, 15_000, "a delivery.failed record");
}

/** The run's lines on the operator's log for a reply given up on. */
const givenUp = (runId: string) => namedLogLines(host.logs(), "delivery.failed").filter((line) => line.run_id === runId);

describe("a platform error quoting the request", () => {
  it("Discord: the interaction token is not kept in the delivery trail", async () => {
    const interaction = { id: "990000000000000001", application_id: APPLICATION_ID, type: 2, token: INTERACTION_TOKEN, version: 1, guild_id: "G1", channel_id: "CE1", channel: { id: "CE1", type: 0 }, member: { user: { id: "U42", username: "ada" } }, data: { id: "cmd1", name: "ask", type: 1, options: [{ name: "q", type: 3, value: "echo me" }] } };
    const body = JSON.stringify(interaction);
    const timestamp = String(Math.floor(Date.now() / 1000));
    const res = await fetch(discordWebhook, { method: "POST", headers: { "content-type": "application/json", "x-signature-timestamp": timestamp, "x-signature-ed25519": edSign(null, Buffer.from(timestamp + body), privateKey).toString("hex") }, body });
    expect(res.status).toBe(200);
    const run = await waitFor(() => runner.contexts.find((c) => c.input.text === "echo me"), 15_000, "the run");
    const trail = await deliveryFailures(run.run_id);
    expect(trail).toContain("Invalid request");
    expect(trail).not.toContain(INTERACTION_TOKEN);
    // The reply given up on is one line of the operator's log, in the platform's (scrubbed) words.
    await expect.poll(() => givenUp(run.run_id)).toEqual([expect.objectContaining({ platform: "discord", code: "discord_http_400", status: 400, conversation_id: "CE1", reason: expect.stringContaining("Invalid request") })]);
    expect(host.logs()).not.toContain(INTERACTION_TOKEN);
    expect(host.logs()).not.toContain(DISCORD_BOT_TOKEN);
  });

  it("Lark: the tenant access token is not kept in the delivery trail", async () => {
    const payload = {
      schema: "2.0",
      header: { event_id: "ev_echo_1", event_type: "im.message.receive_v1", create_time: String(Date.now()), token: VERIFICATION_TOKEN, app_id: APP_ID, tenant_key: "tenant_1" },
      event: { sender: { sender_id: { open_id: "ou_1" }, sender_type: "user" }, message: { message_id: "om_echo_1", chat_id: "oc_echo", chat_type: "group", message_type: "text", content: JSON.stringify({ text: "echo lark" }) } },
    };
    const res = await fetch(larkWebhook, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(payload) });
    expect(res.status).toBe(200);
    const run = await waitFor(() => runner.contexts.find((c) => c.input.text === "echo lark"), 15_000, "the run");
    const trail = await deliveryFailures(run.run_id);
    expect(trail).toContain("field validation failed");
    expect(trail).not.toContain(TENANT_TOKEN);
    await expect.poll(() => givenUp(run.run_id)).toEqual([expect.objectContaining({ platform: "lark", status: 400, conversation_id: "oc_echo", reason: expect.stringContaining("field validation failed") })]);
    expect(host.logs()).not.toContain(TENANT_TOKEN);
    expect(host.logs()).not.toContain(APP_SECRET);
  });

  it("Telegram: the bot token, quoted percent-encoded in a URL, is kept neither in the delivery trail nor in the log", async () => {
    expect((await sayOnTelegram(telegramWebhook, TELEGRAM_SECRET, "-4040", "echo telegram")).status).toBe(200);
    const run = await waitFor(() => runner.contexts.find((c) => c.input.text === "echo telegram"), 15_000, "the run");
    const trail = await deliveryFailures(run.run_id);
    expect(trail).toContain("chat not found (POST /bot[redacted]/sendMessage)");
    expect(trail).not.toContain(encodeURIComponent(TELEGRAM_TOKEN));
    await expect.poll(() => givenUp(run.run_id)).toEqual([expect.objectContaining({ platform: "telegram", conversation_id: "-4040", reason: expect.stringContaining("chat not found") })]);
    expect(host.logs()).not.toContain(encodeURIComponent(TELEGRAM_TOKEN));
  });
});
