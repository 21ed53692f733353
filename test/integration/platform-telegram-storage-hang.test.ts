import { beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../support/fake-platform";
import { useTelegramPlatform, type TelegramPlatform } from "../support/telegram-platform";

/**
 * Telegram sends an update again until it is answered 2xx: one whose raw payload R2 does not take (it does not answer,
 * or fails the put) fails (503 storage_unavailable), the event recorded already, and the redelivery stores the payload
 * (README "R2 that does not answer"). Unlike a Discord interaction or a Slack press, which are sent once
 * (platform-discord-storage-hang, platform-slack-storage-hang).
 */
// Telegram waits long for its answer: BLOB_OP_TIMEOUT_MS alone bounds the put, shortened here.
const platform = useTelegramPlatform({ storageDrill: true, vars: { BLOB_OP_TIMEOUT_MS: "500" } });
const { post, update, sendsTo, contextFor } = platform;
let host: TelegramPlatform["host"];
let botId: string;
beforeAll(() => void ({ host, botId } = platform));

describe("Telegram: a raw payload R2 does not take", () => {
  it("fails the update (503), the event recorded; Telegram's redelivery stores the payload, and the message runs once", async () => {
    host.storageHang({ op: "put", key: "raw/" });
    const u = update("-100300", { text: "raw refused once" });
    const first = await post(u);
    expect([first.status, first.body.error?.code]).toEqual([503, "storage_unavailable"]);
    const eventId = `telegram:${botId}:${u.update_id}`;
    const [row] = await host.query<{ raw_ref: string | null }>("SELECT raw_ref FROM event_log WHERE event_id = ?", [eventId]);
    expect(row.raw_ref).toMatch(/^raw\/telegram\//);
    // Telegram sends it again: a duplicate, which stores the payload the row names.
    expect(await post(u)).toEqual({ status: 200, body: { ok: true } });
    await waitFor(() => sendsTo("-100300").length > 0, 10_000, "the reply");
    expect(contextFor("raw refused once")).toHaveLength(1);
    const raw = await host.admin("GET", `/v1/admin/events/${encodeURIComponent(eventId)}/raw`);
    expect([raw.status, raw.body.message?.text]).toEqual([200, "raw refused once"]);
  });

  it("R2 failing the put: the update fails 503 storage_unavailable, as storage's trouble; the redelivery stores the payload", async () => {
    host.storageFailure({ op: "put", key: "raw/" });
    const u = update("-100310", { text: "raw failed once" });
    const first = await post(u);
    expect([first.status, first.body.error]).toEqual([503, { code: "storage_unavailable", message: "storage failed (an R2 put did not go through); try again" }]);
    expect(await post(u)).toEqual({ status: 200, body: { ok: true } });
    await waitFor(() => sendsTo("-100310").length > 0, 10_000, "the reply");
    expect(contextFor("raw failed once")).toHaveLength(1);
    const eventId = `telegram:${botId}:${u.update_id}`;
    // Read back while R2 fails the read: storage's trouble too; then served.
    host.storageFailure({ op: "get", key: "raw/" });
    const unread = await host.admin("GET", `/v1/admin/events/${encodeURIComponent(eventId)}/raw`);
    expect([unread.status, unread.body.error?.code]).toEqual([503, "storage_unavailable"]);
    const raw = await host.admin("GET", `/v1/admin/events/${encodeURIComponent(eventId)}/raw`);
    expect([raw.status, raw.body.message?.text]).toEqual([200, "raw failed once"]);
    await platform.keepsSecretsOut();
  });

  it("R2 failing a photo's put: the photo is left out, said not stored, and the message runs", async () => {
    host.storageFailure({ op: "put", key: "artifacts/" });
    const u = update("-100320", { photo: [{ file_id: "photo-failed", width: 800, height: 800 }], caption: "photo failed" });
    expect(await post(u)).toEqual({ status: 200, body: { ok: true } });
    await waitFor(() => sendsTo("-100320").length > 0, 10_000, "the reply");
    expect(contextFor("photo failed").map((c) => c.input.attachments)).toEqual([[]]);
    const [row] = await host.query<{ metadata_json: string }>("SELECT metadata_json FROM event_log WHERE event_id = ?", [`telegram:${botId}:${u.update_id}`]);
    expect(JSON.parse(row.metadata_json).attachments_unavailable).toBe("not stored: storage failed");
  });
});
