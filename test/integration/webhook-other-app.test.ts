import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { startChatRunner, startFakePlatform, waitFor, type FakeReply, type PlatformCall } from "../support/fake-platform";
import { discordKeyPair, discordSignature } from "../support/discord-signing";

/**
 * Two bots of two apps given one secret by mistake (a Lark verification token, a Discord public key): a request the
 * platform made for one app passes the other bot's check. Each names its app (Lark's `app_id`, Discord's
 * `application_id`), and a bot takes only its own app's: another's, sent to its address, must not run as its event
 * and be answered with its credentials.
 */
const LARK_TOKEN = "one-verification-token-0123456789";
const LARK = { a: { app_id: "cli_app_a", app_secret: "lark-secret-a-0123456789" }, b: { app_id: "cli_app_b", app_secret: "lark-secret-b-0123456789" } };
const TENANT = { [LARK.a.app_id]: "t-tenant-token-a", [LARK.b.app_id]: "t-tenant-token-b" };
const DISCORD = { a: "1000000000000000001", b: "1000000000000000002" };
const key = discordKeyPair();

let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startChatRunner>>;
let replies = 0;

function platformApi(call: PlatformCall): FakeReply {
  if (call.path === "/open-apis/auth/v3/tenant_access_token/internal") {
    const app = Object.values(LARK).find((l) => l.app_id === call.body?.app_id && l.app_secret === call.body?.app_secret);
    return app ? { json: { code: 0, msg: "ok", tenant_access_token: TENANT[app.app_id], expire: 7200 } } : { json: { code: 10014, msg: "app secret invalid" } };
  }
  if (/^\/open-apis\/im\/v1\/messages\/[^/]+\/reply$/.test(call.path)) return { json: { code: 0, msg: "success", data: { message_id: `om_reply_${++replies}` } } };
  if (call.method === "PATCH") return { json: { code: 0, msg: "success", id: "original", content: call.body?.content } };
  if (call.method === "POST") return { json: { code: 0, msg: "success", id: `followup_${++replies}` } };
  return { status: 404, json: { code: 404, msg: "not found" } };
}

beforeAll(async () => {
  fake = await startFakePlatform(platformApi);
  runner = await startChatRunner("other-app");
  host = await startTestHost({ captureLogs: true });
  const bots: [string, string, Record<string, string>][] = [
    ["lark-a", "lark", { ...LARK.a, verification_token: LARK_TOKEN }],
    ["lark-b", "lark", { ...LARK.b, verification_token: LARK_TOKEN }],
    ["discord-a", "discord", { application_id: DISCORD.a, public_key: key.publicKeyHex, bot_token: "discord-bot-token-a" }],
    ["discord-b", "discord", { application_id: DISCORD.b, public_key: key.publicKeyHex, bot_token: "discord-bot-token-b" }],
  ];
  for (const [botId, platform, credentials] of bots) {
    expect((await host.admin("POST", "/v1/admin/bots", { bot_id: botId, platform, api_base_url: fake.url, credentials })).status).toBe(201);
    await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: `agent-${botId}`, scope: { type: "bot", id: botId } });
  }
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

async function send(platform: string, botId: string, body: string, headers: Record<string, string> = {}) {
  const res = await fetch(`${host.url}/v1/webhooks/${platform}/${botId}`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body });
  return { status: res.status, body: await res.json() };
}
const refusal = (why: string) => ({ error: { code: "forbidden", message: `webhook refused: ${why}` } });
const contextsSaying = (text: string) => runner.contexts.filter((c) => c.input.text === text);
const recordedFor = (botId: string) => host.query<{ event_id: string }>("SELECT event_id FROM event_log WHERE bot_id = ?", [botId]);

let n = 0;
/** A person's private message to the app `appId`, as Lark's schema 2.0 sends it. */
function larkMessage(appId: string, text: string) {
  const message = { message_id: `om_${++n}`, chat_id: `oc_private_${n}`, chat_type: "p2p", message_type: "text", content: JSON.stringify({ text }), create_time: String(Date.now()) };
  const sender = { sender_id: { open_id: "ou_user_1", union_id: "on_1", user_id: null }, sender_type: "user", tenant_key: "tenant_1" };
  return JSON.stringify({ schema: "2.0", header: { event_id: `ev_other_${n}`, event_type: "im.message.receive_v1", create_time: String(Date.now()), token: LARK_TOKEN, app_id: appId, tenant_key: "tenant_1" }, event: { sender, message } });
}

describe("Lark: two apps given one verification token", () => {
  it("refuses at B's address an event of app A (403), starting nothing; the same event at A's address runs, answered with A's tenant token", async () => {
    const event = larkMessage(LARK.a.app_id, "lark question for A");
    const atB = await send("lark", "lark-b", event);
    expect(atB).toEqual({ status: 403, body: refusal("the event is for Lark app cli_app_a, not this bot's (cli_app_b)") });
    expect((await send("lark", "lark-a", event)).status).toBe(200);
    expect((await waitFor(() => contextsSaying("lark question for A")[0], 10_000, "A's run")).conversation.bot_id).toBe("lark-a");
    const reply = await waitFor(() => fake.calls.find((c) => c.path.endsWith("/reply") && String(c.body?.content).includes("lark question for A")), 10_000, "A's reply");
    expect(reply.headers.authorization).toBe(`Bearer ${TENANT[LARK.a.app_id]}`);
    expect(await recordedFor("lark-b")).toEqual([]);
    expect(contextsSaying("lark question for A")).toHaveLength(1);
    expect(fake.calls.filter((c) => c.headers.authorization === `Bearer ${TENANT[LARK.b.app_id]}`)).toEqual([]);
    expect((await host.admin("GET", "/v1/admin/bots/lark-b")).body.last_webhook_refusal.reason).toBe("webhook refused: the event is for Lark app cli_app_a, not this bot's (cli_app_b)");
  });

  it("refuses an event of the older schema 1.0 naming another app (event.app_id), and takes its own app's", async () => {
    const v1 = (appId: string, text: string) =>
      JSON.stringify({ uuid: `uuid_${++n}`, token: LARK_TOKEN, ts: String(Date.now() / 1000), type: "event_callback", event: { type: "message", app_id: appId, tenant_key: "tenant_1", msg_type: "text", chat_type: "private", open_chat_id: `oc_v1_${n}`, open_id: "ou_user_1", open_message_id: `om_v1_${n}`, text } });
    expect(await send("lark", "lark-b", v1(LARK.a.app_id, "v1 of A"))).toEqual({ status: 403, body: refusal("the event is for Lark app cli_app_a, not this bot's (cli_app_b)") });
    expect((await send("lark", "lark-b", v1(LARK.b.app_id, "v1 of B"))).status).toBe(200);
    expect(await recordedFor("lark-b")).toHaveLength(1);
  });

  it("answers the URL challenge at either address: it names no app", async () => {
    for (const botId of ["lark-a", "lark-b"]) expect(await send("lark", botId, JSON.stringify({ challenge: `c-${botId}`, token: LARK_TOKEN, type: "url_verification" }))).toEqual({ status: 200, body: { challenge: `c-${botId}` } });
  });
});

describe("Discord: two applications given one public key", () => {
  const interaction = (applicationId: string, value: string) => ({
    id: `13000000000000000${++n}`, application_id: applicationId, type: 2, token: `interaction-token-${n}`, version: 1, channel_id: "555", guild_id: "777",
    member: { user: { id: "42", username: "ada" }, nick: null }, data: { id: "1", name: "ask", type: 1, options: [{ name: "question", type: 3, value }] },
  });
  const signedSend = (botId: string, body: unknown) => send("discord", botId, JSON.stringify(body), discordSignature(JSON.stringify(body), key.privateKey));

  it("refuses at B's address an interaction of application A (403), starting nothing; the same interaction at A's address runs, answered as A", async () => {
    const asked = interaction(DISCORD.a, "discord question for A");
    expect(await signedSend("discord-b", asked)).toEqual({ status: 403, body: refusal(`the interaction is for Discord application ${DISCORD.a}, not this bot's (${DISCORD.b})`) });
    expect(await signedSend("discord-a", asked)).toEqual({ status: 200, body: { type: 5 } });
    expect((await waitFor(() => contextsSaying("discord question for A")[0], 10_000, "A's run")).conversation.bot_id).toBe("discord-a");
    await waitFor(() => fake.calls.find((c) => c.path === `/webhooks/${DISCORD.a}/${asked.token}/messages/@original`), 10_000, "A's answer");
    expect(fake.calls.filter((c) => c.path.startsWith(`/webhooks/${DISCORD.b}/`))).toEqual([]);
    expect(await recordedFor("discord-b")).toEqual([]);
    expect(contextsSaying("discord question for A")).toHaveLength(1);
  });

  it("refuses application A's PING at B's address, and answers it at A's", async () => {
    const ping = { id: `1300000000000000${++n}`, application_id: DISCORD.a, type: 1, token: "ping-token", version: 1 };
    expect((await signedSend("discord-b", ping)).status).toBe(403);
    expect(await signedSend("discord-a", ping)).toEqual({ status: 200, body: { type: 1 } });
  });
});
