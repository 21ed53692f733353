import { generateKeyPairSync, sign as edSign, type KeyObject } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { startChatRunner, startFakePlatform, waitFor, type FakeReply, type PlatformCall } from "../support/fake-platform";

/** A Discord files-only answer whose edit of the deferred response may have been applied is made again as an edit, never posted again as a follow-up. */
const APPLICATION_ID = "1122334455667788";
const BOT_TOKEN = "discord-bot-token-SECRET-0123456789";
/** Tokens whose first write to @original is applied, then answered 504. */
const gatewayTimeouts = new Set<string>();

let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startChatRunner>>;
let privateKey: KeyObject;
let publicKeyHex: string;
let webhookUrl: string;
let followups = 0;

function discordApi(call: PlatformCall): FakeReply {
  const m = /^\/webhooks\/([^/]+)\/([^/]+)(?:\/messages\/(.+))?$/.exec(call.path);
  if (!m || m[1] !== APPLICATION_ID) return { status: 404, json: { message: "Unknown Webhook", code: 10015 } };
  if (call.method === "PATCH" && m[3] === "@original" && gatewayTimeouts.delete(m[2])) return { status: 504, json: { message: "upstream timeout" } };
  if (call.method === "PATCH") return { json: { id: m[3] === "@original" ? "original_msg" : m[3] } };
  if (call.method === "POST") return { json: { id: `followup_${++followups}` } };
  return { status: 405, json: { message: "405", code: 0 } };
}

beforeAll(async () => {
  const pair = generateKeyPairSync("ed25519");
  privateKey = pair.privateKey;
  publicKeyHex = pair.publicKey.export({ type: "spki", format: "der" }).subarray(-32).toString("hex");
  fake = await startFakePlatform(discordApi);
  runner = await startChatRunner("discord-deliv");
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

let seq = 0;
function command(question: string) {
  const id = `8${String(++seq).padStart(17, "0")}`;
  return {
    id, application_id: APPLICATION_ID, type: 2, token: `interaction-token-${id}-secret`, version: 1, guild_id: "G1", channel_id: "C1", channel: { id: "C1", type: 0 },
    member: { user: { id: "U42", username: "ada", global_name: "Ada" } },
    data: { id: "cmd1", name: "ask", type: 1, options: [{ name: "question", type: 3, value: question }] },
  };
}
async function post(interaction: unknown) {
  const body = JSON.stringify(interaction);
  const timestamp = String(Math.floor(Date.now() / 1000));
  const signature = edSign(null, Buffer.from(timestamp + body), privateKey).toString("hex");
  const res = await fetch(webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-signature-timestamp": timestamp, "x-signature-ed25519": signature }, body });
  return { status: res.status, body: await res.json() };
}
const writesFor = (i: { token: string }) => fake.calls.filter((c) => c.path.startsWith(`/webhooks/${APPLICATION_ID}/${i.token}`));

describe("Discord: a files-only answer whose edit of the deferred response may have been applied", () => {
  it("is made again as an edit of @original (as a text answer is), never posted a second time as a follow-up", async () => {
    const i = command("attachonly report.pdf");
    gatewayTimeouts.add(i.token);
    expect((await post(i)).body).toEqual({ type: 5 });
    const runId = await waitFor(() => runner.contexts.find((c) => c.input.text === "attachonly report.pdf")?.run_id);
    await host.waitForRun(runId);
    await waitFor(async () => (await host.query("SELECT 1 FROM event_log WHERE run_id = ? AND event_type = 'delivery.succeeded'", [runId])).length > 0, 15_000, "the file delivered");
    await new Promise((r) => setTimeout(r, 1500));
    // The 504'd PATCH may have put the file in the deferred response: the retry must edit that same message,
    // not post the file again beside it (two copies), nor leave "thinking…" if it had not.
    expect(writesFor(i).map((w) => `${w.method} ${w.path.endsWith("/@original") ? "@original" : "followup"}`)).toEqual(["PATCH @original", "PATCH @original"]);
  });
});
