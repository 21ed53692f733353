import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";

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

async function deliver(updateId: number) {
  const body = {
    update_id: updateId,
    message: { message_id: updateId, date: Math.floor(Date.now() / 1000), chat: { id: -500, type: "group" }, from: { id: 1, is_bot: false, first_name: "A" }, new_chat_members: [{ id: updateId, is_bot: false, first_name: "N" }] },
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
});
