import { beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { waitFor } from "../support/fake-platform";
import { useSlackPlatform, type SlackPlatform } from "../support/slack-platform";

/**
 * Slack wants its answer within 3 s; R2 that never answers must not hold it (README "R2 that does not answer"): a file
 * R2 does not take is left out as one not downloaded in time is, and the message runs; a raw payload R2 does not take
 * fails the request within Slack's time, the event recorded already, and Slack's redelivery stores it. The default
 * BLOB_OP_TIMEOUT_MS (10 s) is far past Slack's time: the platform's deadline is the bound here. A button press Slack
 * never sends again is answered as usual instead, kept without its raw copy.
 */
const platform = useSlackPlatform({ storageDrill: true });
const { post, sign, callback, message, postsTo, contextFor } = platform;
let host: SlackPlatform["host"];
let fake: SlackPlatform["fake"];
let botId: string;
let webhookUrl: string;
beforeAll(() => void ({ host, fake, botId, webhookUrl } = platform));

/** A button press as Slack sends it (form-encoded, signed as events are), on the bot's message in `channel`. */
async function press(channel: string, value: string, triggerId: string) {
  const payload = {
    type: "block_actions",
    user: { id: "U42", username: "ada", name: "ada", team_id: "T1" },
    api_app_id: "A1",
    container: { type: "message", message_ts: "1700000000.000300", channel_id: channel, is_ephemeral: false },
    trigger_id: triggerId,
    team: { id: "T1", domain: "acme" },
    channel: { id: channel, name: "general" },
    message: { user: platform.BOT_USER, type: "message", ts: "1700000000.000300", bot_id: "B0BOT", app_id: "A1", text: "Approve?" },
    actions: [{ block_id: "b1", action_id: "approve_btn", type: "button", value, action_ts: "1700000000.0003001" }],
  };
  const body = new URLSearchParams({ payload: JSON.stringify(payload) }).toString();
  const timestamp = Math.floor(Date.now() / 1000);
  const headers = { "content-type": "application/x-www-form-urlencoded", "x-slack-request-timestamp": String(timestamp), "x-slack-signature": sign(timestamp, body) };
  const res = await fetch(webhookUrl, { method: "POST", headers, body });
  return { status: res.status, text: await res.text() };
}

const metadataOf = async (eventId: string) => {
  const [row] = await host.query<{ metadata_json: string }>("SELECT metadata_json FROM event_log WHERE event_id = ?", [eventId]);
  return JSON.parse(row.metadata_json);
};

describe("Slack: R2 that never answers while Slack waits", () => {
  it("a shared file R2 does not take: acknowledged within 3 s, the message runs without it, the reason recorded", async () => {
    const held = deferred<void>();
    host.storageHang({ op: "put", key: "artifacts/", onHeld: held.resolve });
    const file = { id: "F1", name: "report.pdf", mimetype: "application/pdf", url_private_download: `${fake.url}/files/F1/report.pdf` };
    const ev = callback(message("C910", "file unstored", { subtype: "file_share", files: [file] }));
    const started = Date.now();
    expect((await post(ev)).status).toBe(200);
    expect(Date.now() - started).toBeLessThan(3_000);
    await held.promise;
    await waitFor(() => postsTo("C910").length > 0);
    expect(contextFor("file unstored")[0].input.attachments).toEqual([]);
    expect((await metadataOf(`slack:${botId}:msg:C910:${ev.event.ts}`)).attachments_unavailable).toMatch(/^report\.pdf \(not stored: storage did not answer within \d+ ms\)$/);
    expect(await host.query("SELECT 1 FROM artifact WHERE conversation_id = 'C910'")).toEqual([]);
  });

  it("its raw payload R2 does not take: the request fails within 3 s, the event recorded; the redelivery stores it", async () => {
    const held = deferred<void>();
    host.storageHang({ op: "put", key: "raw/", onHeld: held.resolve });
    const ev = callback(message("C920", "raw unstored"));
    const started = Date.now();
    const answering = post(ev);
    // Slack sends it again, so its run is not held for the payload: handed over while the put is still held (the put
    // gives up at Slack's deadline, 2 s in; only a request sent once waits for its payload).
    await waitFor(() => contextFor("raw unstored").length > 0, 1_500, "the run, handed over before the payload's put gave up");
    const first = await answering;
    expect(Date.now() - started).toBeLessThan(3_000);
    await held.promise;
    expect(first.status).toBe(503);
    expect(JSON.parse(first.text).error.code).toBe("storage_unavailable");
    const eventId = `slack:${botId}:msg:C920:${ev.event.ts}`;
    expect(await host.query("SELECT 1 FROM event_log WHERE event_id = ?", [eventId])).toHaveLength(1);
    // Slack sends it again: a duplicate, which stores the payload.
    expect((await post(ev, { headers: { "x-slack-retry-num": "1", "x-slack-retry-reason": "http_error" } })).status).toBe(200);
    await waitFor(() => postsTo("C920").length > 0);
    expect(contextFor("raw unstored")).toHaveLength(1);
    const raw = await host.admin("GET", `/v1/admin/events/${encodeURIComponent(eventId)}/raw`);
    expect([raw.status, raw.body.event?.text]).toEqual([200, "raw unstored"]);
  });

  it("a button press's raw payload R2 does not take: Slack sent it once, so it is acknowledged as usual and answered, kept without its raw copy", async () => {
    const held = deferred<void>();
    host.storageHang({ op: "put", key: "raw/", onHeld: held.resolve });
    const started = Date.now();
    const res = await press("C930", "press unstored", "930.1234.abcdef");
    expect(Date.now() - started).toBeLessThan(3_000);
    await held.promise;
    expect(res).toEqual({ status: 200, text: "" });
    const [reply] = await waitFor(() => postsTo("C930").length > 0 && postsTo("C930"), 10_000, "the answer to the press");
    expect(reply.body.text).toBe("echo: press unstored");
    const eventId = `slack:${botId}:interaction:930.1234.abcdef`;
    expect(await host.query("SELECT raw_ref FROM event_log WHERE event_id = ?", [eventId])).toEqual([{ raw_ref: null }]);
    const raw = await host.admin("GET", `/v1/admin/events/${encodeURIComponent(eventId)}/raw`);
    expect([raw.status, raw.body.error?.code]).toEqual([404, "not_found"]);
    expect(raw.body.error.message).toMatch(/was not stored/);
  });
});
