import { createHmac } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";

/**
 * This session made Slack's `bot_token` a bot token only (`xoxb-`). That is right for credentials given now, but the
 * same schema parses stored credentials (botOf), so a Slack bot registered earlier with any other `xox?-` token the
 * host accepted then silently stops existing: its webhook answers 404 (Slack retries, then disables the app's event
 * subscription) and its in-flight replies cannot be delivered, while GET /v1/admin/bots still lists it as usual.
 * Telegram's stricter secret_token took the README's path: "a bot stored earlier ... keeps working until its
 * credentials are replaced" (newCredentials). Slack's must too.
 */
const SIGNING_SECRET = "slack-signing-secret-0123456789abcdef";
let host: TestHost;

beforeAll(async () => {
  host = await startTestHost();
});
afterAll(async () => {
  await host?.dispose();
});

const sign = (timestamp: number, body: string) => `v0=${createHmac("sha256", SIGNING_SECRET).update(`v0:${timestamp}:${body}`).digest("hex")}`;

describe("a Slack bot stored before bot tokens only", () => {
  it("keeps receiving its webhooks; a new user token is still refused", async () => {
    const created = await host.admin("POST", "/v1/admin/bots", { platform: "slack", workspace_id: "acme", credentials: { bot_token: "xoxb-TEST-slack-bot-token-1234567890", signing_secret: SIGNING_SECRET } });
    expect(created.status).toBe(201);
    // As an earlier release stored it (it accepted any `xox?-` token); unsealed values are read as they are.
    await host.query("UPDATE bot SET credentials_json = ? WHERE bot_id = ?", [JSON.stringify({ bot_token: "xoxp-TEST-user-token-1234567890", signing_secret: SIGNING_SECRET }), created.body.bot_id]);

    const body = JSON.stringify({ type: "url_verification", challenge: "still-here" });
    const timestamp = Math.floor(Date.now() / 1000);
    const res = await fetch(created.body.webhook_url, { method: "POST", headers: { "content-type": "application/json", "x-slack-request-timestamp": String(timestamp), "x-slack-signature": sign(timestamp, body) }, body });
    expect([res.status, await res.text()]).toEqual([200, JSON.stringify({ challenge: "still-here" })]);

    const fresh = await host.admin("POST", "/v1/admin/bots", { platform: "slack", workspace_id: "acme", credentials: { bot_token: "xoxp-TEST-user-token-1234567890", signing_secret: SIGNING_SECRET } });
    expect(fresh.status).toBe(400);
  });
});
