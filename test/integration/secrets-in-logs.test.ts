/**
 * credentials must never reach a log line (README "Host-held models...":
 * "Secrets are write-only: never returned, sent to a runner, written to the ledger
 * or logged"; "Chat platforms": "credentials are never returned or logged").
 * A host without SECRETS_KEY stores credentials as given (README "Credentials at
 * rest"), which is a supported configuration.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT } from "../../local/build";
import { startHost, type LocalHost } from "../../local/host";
import { adminCall } from "../../local/setup";
import { ADMIN_TOKEN } from "../support/host";

let host: LocalHost;
let dir: string;
let logs = "";

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "agent-host-logs-"));
  // No SECRETS_KEY: credentials are stored as given.
  host = await startHost({ adminToken: ADMIN_TOKEN, dbUrl: `file:${join(dir, "host.db")}`, scriptPath: join(ROOT, "dist/test/worker.js"), onRuntimeOutput: (t) => (logs += t) });
});
afterAll(async () => {
  await host?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

const admin = <T = any>(method: string, path: string, body?: unknown) => adminCall<T>(host, method, path, body);

describe("secrets in log lines", () => {
  it("never logs a model's api_key when storing the model fails", async () => {
    const apiKey = "sk-live-LOGTEST-model-key-0123456789";
    // The next query carrying the key fails, as a database that went away would.
    host.databaseOutage({ queries: 1, matching: apiKey });
    const res = await admin("POST", "/v1/admin/models", { model_id: "m-logs", name: "M", kind: "llm", base_url: "https://llm.example/v1", api_key: apiKey, model: "x" });
    expect(res.status).toBe(500);
    expect(JSON.stringify(res.body)).not.toContain(apiKey);
    await new Promise((r) => setTimeout(r, 200));
    expect(logs).not.toContain(apiKey);
  });

  it("never logs a bot's credentials when storing the bot fails", async () => {
    const botToken = "123456:LOGTESTbotTOKENabcdef";
    host.databaseOutage({ queries: 1, matching: botToken });
    const res = await admin("POST", "/v1/admin/bots", { bot_id: "bot-logs", platform: "telegram", credentials: { bot_token: botToken, secret_token: "LOGTESTsecretTOKEN" } });
    expect(res.status).toBe(500);
    expect(JSON.stringify(res.body)).not.toContain(botToken);
    await new Promise((r) => setTimeout(r, 200));
    expect(logs).not.toContain(botToken);
    expect(logs).not.toContain("LOGTESTsecretTOKEN");
  });
});
