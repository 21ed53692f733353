import { beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { waitFor } from "../support/fake-platform";
import { useSlackPlatform, type SlackPlatform } from "../support/slack-platform";

/**
 * Slack wants its answer within 3 s; R2 that never answers must not hold it (README "R2 that does not answer"): a file
 * R2 does not take is left out as one not downloaded in time is, and the message runs; a raw payload R2 does not take
 * fails the request within Slack's time, the event recorded already, and Slack's redelivery stores it. The default
 * BLOB_OP_TIMEOUT_MS (10 s) is far past Slack's time: the platform's deadline is the bound here.
 */
const platform = useSlackPlatform({ storageDrill: true });
const { post, callback, message, postsTo, contextFor } = platform;
let host: SlackPlatform["host"];
let fake: SlackPlatform["fake"];
let botId: string;
beforeAll(() => void ({ host, fake, botId } = platform));

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
    const first = await post(ev);
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
});
