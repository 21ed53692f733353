/**
 * A platform message with several files, one of which cannot be fetched.
 * README "Chat platforms": "a file not fetched by then is left out, the message still runs, and the reason is in
 * the event's metadata (attachments_unavailable)". One bad file must not take the good ones with it.
 */
import { describe, expect, it } from "vitest";
import { useChatHost } from "../support/chat-host";
import { waitFor, type PlatformCall, type FakeReply } from "../support/fake-platform";
import { SLACK_AUTH_TEST } from "../support/slack-events";
import { slackSignedHeaders } from "../support/slack-signed";

const BOT_TOKEN = "xoxb-PARTIAL-slack-bot-token-1234567890";
const SIGNING_SECRET = "partial-slack-signing-secret-0123456789";
const FILE = new Uint8Array([0x25, 0x50, 0x44, 0x46, 9, 8, 7]);

function slackApi(call: PlatformCall): FakeReply {
  // Who the bot token is (its workspace T1, as the envelopes say): the host checks every request against it.
  if (call.path === "/auth.test") return { json: SLACK_AUTH_TEST };
  if (call.path === "/files/F1/report.pdf") return { bytes: FILE, headers: { "content-type": "application/pdf" } };
  if (call.path.startsWith("/files/")) return { status: 404, json: {} };
  if (call.path === "/chat.postMessage") return { json: { ok: true, channel: call.body.channel, ts: `${Date.now()}.000100` } };
  if (call.path === "/chat.update") return { json: { ok: true, channel: call.body.channel, ts: call.body.ts } };
  return { status: 404, json: { ok: false, error: "unknown_method" } };
}

const chat = useChatHost({
  api: slackApi,
  runnerName: "partial-slack",
  hostOptions: { captureLogs: false },
  async ready() {
    const credentials = { bot_token: BOT_TOKEN, signing_secret: SIGNING_SECRET };
    await chat.addBot({ platform: "slack", api_base_url: chat.fake.url, credentials }, { agentId: "partial-slack-agent" });
  },
});

async function post(payload: unknown) {
  const body = JSON.stringify(payload);
  return fetch(chat.webhookUrl, { method: "POST", headers: slackSignedHeaders(SIGNING_SECRET, body), body });
}

describe("Slack: one unfetchable file among several", () => {
  it("keeps the files that could be fetched, and records the reason for the one that could not", async () => {
    const good = { id: "F1", name: "report.pdf", mimetype: "application/pdf", url_private_download: `${chat.fake.url}/files/F1/report.pdf` };
    const gone = { id: "F2", name: "gone.pdf", mimetype: "application/pdf", url_private_download: `${chat.fake.url}/files/F2/gone.pdf` };
    const msg = { type: "message", subtype: "file_share", channel: "CRV1", channel_type: "channel", user: "U42", text: "two files", ts: "1800000001.000100", team: "T1", files: [good, gone] };
    const res = await post({ token: "t", team_id: "T1", type: "event_callback", event_id: "EvPARTIALa", event_time: Math.floor(Date.now() / 1000), event: msg });
    expect(res.status).toBe(200);
    const ctx = await waitFor(() => chat.runner.contexts.find((c) => c.input.text === "two files"), 15_000, "the run");
    const [row] = await chat.host.query<{ metadata_json: string }>("SELECT metadata_json FROM event_log WHERE event_id = ?", [`slack:${chat.botId}:msg:CRV1:1800000001.000100`]);
    expect(JSON.parse(row.metadata_json).attachments_unavailable).toMatch(/HTTP 404/);
    // The report was fetched fine (the fake served it): it must reach the runner.
    expect(chat.fake.callsTo(/^\/files\/F1/).length).toBeGreaterThan(0);
    expect(ctx.input.attachments.map((a: any) => a.name)).toEqual(["report.pdf"]);
  });

  it("records why a shared file Slack gives no download URL for is missing, rather than dropping it silently", async () => {
    const hidden = { id: "F9", name: "contract.pdf", mimetype: "application/pdf", file_access: "check_file_info" };
    const msg = { type: "message", subtype: "file_share", channel: "CRV1", channel_type: "channel", user: "U42", text: "the contract", ts: "1800000002.000100", team: "T1", files: [hidden] };
    const res = await post({ token: "t", team_id: "T1", type: "event_callback", event_id: "EvPartialHidden", event_time: Math.floor(Date.now() / 1000), event: msg });
    expect(res.status).toBe(200);
    const ctx = await waitFor(() => chat.runner.contexts.find((c) => c.input.text === "the contract"), 15_000, "the run");
    expect(ctx.input.attachments).toEqual([]);
    const [row] = await chat.host.query<{ metadata_json: string }>("SELECT metadata_json FROM event_log WHERE event_id = ?", [`slack:${chat.botId}:msg:CRV1:1800000002.000100`]);
    expect(JSON.parse(row.metadata_json).attachments_unavailable).toMatch(/^contract\.pdf \(Slack gave no download URL/);
  });
});
