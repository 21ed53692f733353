/**
 * README "Chat platforms": "Every verification fails closed with 401". A body
 * that proves nothing (not JSON, so no verification token can be read from it)
 * sent to a Lark webhook is a request the host cannot verify: it must be
 * refused as unauthenticated (401), as the same body is on every other
 * platform, not answered 400 as if it had come from Lark with a malformed payload.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";

let host: TestHost;
const urls: Record<string, string> = {};

beforeAll(async () => {
  host = await startTestHost({ captureLogs: true });
  const make = async (name: string, platform: string, credentials: Record<string, string>) => {
    const res = await host.admin("POST", "/v1/admin/bots", { platform, credentials });
    expect(res.status).toBe(201);
    urls[name] = res.body.webhook_url;
  };
  await make("lark-plain", "lark", { app_id: "cli_u", app_secret: "unverifiable-app-secret", verification_token: "unverifiable-verification-token" });
  await make("lark-encrypted", "lark", { app_id: "cli_v", app_secret: "unverifiable-app-secret", verification_token: "unverifiable-verification-token", encrypt_key: "unverifiable-encrypt-key-0123" });
  await make("slack", "slack", { bot_token: "xoxb-unverifiable", signing_secret: "unverifiable-signing-secret-0123" });
  await make("telegram", "telegram", { bot_token: "123456:unverifiable", secret_token: "unverifiable_secret_token_0123" });
});
afterAll(async () => {
  await host?.dispose();
});

describe("an anonymous body that is not JSON", () => {
  it("is refused with 401 on every platform, Lark included", async () => {
    for (const [name, url] of Object.entries(urls)) {
      const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: "this is not json" });
      const body = (await res.json()) as { error: { code: string } };
      expect({ name, status: res.status, code: body.error.code }).toEqual({ name, status: 401, code: "unauthorized" });
    }
  });
});
