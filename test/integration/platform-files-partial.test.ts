/**
 * A platform message with several files, one of which cannot be fetched.
 * README "Chat platforms": "a file not fetched by then is left out, the message still runs, and the reason is in
 * the event's metadata (attachments_unavailable)". One bad file must not take the good ones with it.
 */
import { createHmac } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { startChatRunner, startFakePlatform, waitFor, type PlatformCall, type FakeReply } from "../support/fake-platform";
import { SLACK_AUTH_TEST } from "../support/slack-events";

const BOT_TOKEN = "xoxb-PARTIAL-slack-bot-token-1234567890";
const SIGNING_SECRET = "partial-slack-signing-secret-0123456789";
const FILE = new Uint8Array([0x25, 0x50, 0x44, 0x46, 9, 8, 7]);

let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startChatRunner>>;
let botId: string;
let webhookUrl: string;

function slackApi(call: PlatformCall): FakeReply {
  // Who the bot token is (its workspace T1, as the envelopes say): the host checks every request against it.
  if (call.path === "/auth.test") return { json: SLACK_AUTH_TEST };
  if (call.path === "/files/F1/report.pdf") return { bytes: FILE, headers: { "content-type": "application/pdf" } };
  if (call.path.startsWith("/files/")) return { status: 404, json: {} };
  if (call.path === "/chat.postMessage") return { json: { ok: true, channel: call.body.channel, ts: `${Date.now()}.000100` } };
  if (call.path === "/chat.update") return { json: { ok: true, channel: call.body.channel, ts: call.body.ts } };
  return { status: 404, json: { ok: false, error: "unknown_method" } };
}

beforeAll(async () => {
  fake = await startFakePlatform(slackApi);
  runner = await startChatRunner("partial-slack");
  host = await startTestHost();
  const created = await host.admin("POST", "/v1/admin/bots", { platform: "slack", api_base_url: fake.url, credentials: { bot_token: BOT_TOKEN, signing_secret: SIGNING_SECRET } });
  expect(created.status).toBe(201);
  botId = created.body.bot_id;
  webhookUrl = created.body.webhook_url;
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "partial-slack-agent", scope: { type: "bot", id: botId } });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

async function post(payload: unknown) {
  const body = JSON.stringify(payload);
  const ts = Math.floor(Date.now() / 1000);
  const signature = `v0=${createHmac("sha256", SIGNING_SECRET).update(`v0:${ts}:${body}`).digest("hex")}`;
  return fetch(webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-slack-request-timestamp": String(ts), "x-slack-signature": signature }, body });
}

describe("Slack: one unfetchable file among several", () => {
  it("keeps the files that could be fetched, and records the reason for the one that could not", async () => {
    const good = { id: "F1", name: "report.pdf", mimetype: "application/pdf", url_private_download: `${fake.url}/files/F1/report.pdf` };
    const gone = { id: "F2", name: "gone.pdf", mimetype: "application/pdf", url_private_download: `${fake.url}/files/F2/gone.pdf` };
    const msg = { type: "message", subtype: "file_share", channel: "CRV1", channel_type: "channel", user: "U42", text: "two files", ts: "1800000001.000100", team: "T1", files: [good, gone] };
    const res = await post({ token: "t", team_id: "T1", type: "event_callback", event_id: "EvPARTIALa", event_time: Math.floor(Date.now() / 1000), event: msg });
    expect(res.status).toBe(200);
    const ctx = await waitFor(() => runner.contexts.find((c) => c.input.text === "two files"), 15_000, "the run");
    const [row] = await host.query<{ metadata_json: string }>("SELECT metadata_json FROM event_log WHERE event_id = ?", [`slack:${botId}:msg:CRV1:1800000001.000100`]);
    expect(JSON.parse(row.metadata_json).attachments_unavailable).toMatch(/HTTP 404/);
    // The report was fetched fine (the fake served it): it must reach the runner.
    expect(fake.callsTo(/^\/files\/F1/).length).toBeGreaterThan(0);
    expect(ctx.input.attachments.map((a: any) => a.name)).toEqual(["report.pdf"]);
  });

  it("records why a shared file Slack gives no download URL for is missing, rather than dropping it silently", async () => {
    const hidden = { id: "F9", name: "contract.pdf", mimetype: "application/pdf", file_access: "check_file_info" };
    const msg = { type: "message", subtype: "file_share", channel: "CRV1", channel_type: "channel", user: "U42", text: "the contract", ts: "1800000002.000100", team: "T1", files: [hidden] };
    const res = await post({ token: "t", team_id: "T1", type: "event_callback", event_id: "EvPartialHidden", event_time: Math.floor(Date.now() / 1000), event: msg });
    expect(res.status).toBe(200);
    const ctx = await waitFor(() => runner.contexts.find((c) => c.input.text === "the contract"), 15_000, "the run");
    expect(ctx.input.attachments).toEqual([]);
    const [row] = await host.query<{ metadata_json: string }>("SELECT metadata_json FROM event_log WHERE event_id = ?", [`slack:${botId}:msg:CRV1:1800000002.000100`]);
    expect(JSON.parse(row.metadata_json).attachments_unavailable).toMatch(/^contract\.pdf \(Slack gave no download URL/);
  });
});
