import { beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../support/fake-platform";
import { useTelegramPlatform, type TelegramPlatform } from "../support/telegram-platform";

/**
 * Telegram sends an update again until it is answered 2xx: one whose raw payload R2 does not take fails (503), the event
 * recorded already, and the redelivery stores the payload (README "R2 that does not answer"). Unlike a Discord
 * interaction or a Slack press, which are sent once (platform-discord-storage-hang, platform-slack-storage-hang).
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
});
