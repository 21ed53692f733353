import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";

const DAY_MS = 24 * 3600 * 1000;
const SECRET_TOKEN = "raw-retention-secret-token";
let host: TestHost;
let webhookUrl: string;

beforeAll(async () => {
  host = await startTestHost({ vars: { RETENTION_DAYS: "1" } });
  // No agent binds these events and no reply is sent, so the API origin is never called.
  const bot = await host.admin("POST", "/v1/admin/bots", { platform: "telegram", api_base_url: "http://127.0.0.1:9", credentials: { bot_token: "1:raw", secret_token: SECRET_TOKEN } });
  expect(bot.status).toBe(201);
  webhookUrl = bot.body.webhook_url;
});
afterAll(() => host?.dispose());

async function deliver(updateId: number, chatId = -500) {
  const body = {
    update_id: updateId,
    message: { message_id: updateId, date: Math.floor(Date.now() / 1000), chat: { id: chatId, type: "group" }, from: { id: 1, is_bot: false, first_name: "A" }, new_chat_members: [{ id: updateId, is_bot: false, first_name: "N" }] },
  };
  const res = await fetch(webhookUrl, { method: "POST", headers: { "x-telegram-bot-api-secret-token": SECRET_TOKEN }, body: JSON.stringify(body) });
  expect(res.status).toBe(200);
}

describe("retention of platform payloads", () => {
  it("deletes a platform event's raw payload from R2 together with its EventLog rows, and only theirs", async () => {
    await deliver(1);
    const cutoff = Date.now();
    await new Promise((r) => setTimeout(r, 20));
    await deliver(2);
    const rows = await host.query<{ raw_ref: string; created_at: number }>("SELECT raw_ref, created_at FROM event_log WHERE source = 'telegram' ORDER BY seq");
    expect(rows).toHaveLength(2);
    expect(rows.every((r) => r.raw_ref.startsWith("raw/telegram/"))).toBe(true);
    expect((await host.r2Keys("raw/")).sort()).toEqual(rows.map((r) => r.raw_ref).sort());

    await host.triggerScheduled({ scheduledTime: new Date(cutoff + DAY_MS) });
    const left = await host.query<{ raw_ref: string }>("SELECT raw_ref FROM event_log WHERE source = 'telegram'");
    expect(left).toEqual([{ raw_ref: rows[1].raw_ref }]);
    expect(await host.r2Keys("raw/")).toEqual([rows[1].raw_ref]);
  });

  it("never leaves a payload in R2 that no row names, when the database fails during a sweep", async () => {
    await deliver(7001, -501);
    const [row] = await host.query<{ raw_ref: string }>("SELECT raw_ref FROM event_log WHERE conversation_id = '-501'");
    expect(await host.r2Keys("raw/")).toContain(row.raw_ref);
    const scheduledTime = new Date(Date.now() + 2 * DAY_MS);
    // The sweep's "is this payload still named?" read fails once (a blip of the database): that sweep fails.
    host.databaseOutage({ queries: 1, matching: 'raw_ref\\" from' });
    await expect(host.triggerScheduled({ scheduledTime })).rejects.toThrow();
    // The next sweep finishes the job: the rows and their payload are gone, nothing is left behind.
    await host.triggerScheduled({ scheduledTime });
    expect(await host.query("SELECT seq FROM event_log WHERE conversation_id = '-501'")).toEqual([]);
    expect(await host.r2Keys("raw/")).not.toContain(row.raw_ref);
  });
});

describe("an event id seen again after retention swept its record", () => {
  it("is recorded anew, with its own attachment (never the bytes of the first)", async () => {
    const ev = (text: string) => ({ ...messageEvent("reuse-1", text, { input: { text, attachments: [{ content_base64: Buffer.from(text).toString("base64"), name: "f.txt" }] } }), event_id: "client-evt-42" });
    expect((await host.postEvent(ev("first file"))).status).toBe(202);
    await host.triggerScheduled({ scheduledTime: new Date(Date.now() + 2 * DAY_MS) });
    expect(await host.query("SELECT seq FROM event_log WHERE event_id = 'client-evt-42'")).toEqual([]);
    // The first attachment lives on (ARTIFACT_TTL_SECONDS, 30 days by default, outlasts RETENTION_DAYS).
    const again = await host.postEvent(ev("second file"));
    expect(again.status).toBe(202);
    const [logged] = await host.query<{ input_json: string }>("SELECT input_json FROM event_log WHERE event_id = 'client-evt-42'");
    const named = JSON.parse(logged.input_json).attachments[0].artifact_id;
    const [art] = await host.query<{ r2_key: string }>("SELECT r2_key FROM artifact WHERE artifact_id = ?", [named]);
    expect(Buffer.from((await host.r2Object(art.r2_key))!).toString()).toBe("second file");
  });
});
