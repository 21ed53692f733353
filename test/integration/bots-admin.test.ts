import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openValues, secretBox } from "../../src/lib/secret-box";
import { ADMIN_TOKEN, namedLogLines, SECRETS_KEY, startTestHost, type TestHost } from "../support/host";

/** Opens what the host sealed, as a test with the host's key may. */
const box = secretBox(SECRETS_KEY);

const TELEGRAM = { bot_token: "999:ADMIN-test-telegram-token", secret_token: "admin-secret-token-123" };
const SLACK = { bot_token: "xoxb-admin-test-slack-token", signing_secret: "admin-slack-signing-secret-0123" };
const LARK = { app_id: "cli_admin", app_secret: "admin-lark-app-secret", verification_token: "admin-lark-verify", encrypt_key: "admin-lark-encrypt" };
const DISCORD = { application_id: "42", public_key: "ab".repeat(32), bot_token: "admin-discord-bot-token" };
const SECRETS = [TELEGRAM.bot_token, TELEGRAM.secret_token, SLACK.bot_token, SLACK.signing_secret, LARK.app_secret, LARK.verification_token, LARK.encrypt_key, DISCORD.bot_token];

let host: TestHost;

/**
 * A chunked POST (no Content-Length) that sends `first`, stalls `pauseMs`, then ends with `rest`: whether the host
 * answered during the stall (without waiting for the body), and its status.
 */
function stalledChunked(url: string, headers: Record<string, string>, first: string, rest: string, pauseMs: number) {
  return new Promise<{ answeredDuringPause: boolean; status?: number; error?: string }>((resolve) => {
    let pausing = true;
    let answeredDuringPause = false;
    const req = request(url, { method: "POST", headers: { ...headers, "transfer-encoding": "chunked" }, agent: false }, (res) => {
      answeredDuringPause = pausing;
      res.resume();
      res.on("end", () => resolve({ answeredDuringPause, status: res.statusCode }));
    });
    req.on("error", (err: NodeJS.ErrnoException) => resolve({ answeredDuringPause, error: err.code ?? err.message }));
    req.write(first);
    setTimeout(() => {
      pausing = false;
      req.end(rest);
    }, pauseMs);
  });
}
beforeAll(async () => {
  host = await startTestHost({ captureLogs: true });
});
afterAll(async () => {
  await host?.dispose();
});

describe("admin API for bots", () => {
  it("registers a bot of each platform, answering its id and webhook URL and never its credentials", async () => {
    const bodies: string[] = [];
    for (const [platform, credentials] of Object.entries({ telegram: TELEGRAM, slack: SLACK, lark: LARK, discord: DISCORD })) {
      const res = await host.admin("POST", "/v1/admin/bots", { platform, name: `${platform} bot`, workspace_id: "ws1", credentials });
      bodies.push(JSON.stringify(res.body));
      expect(res.status).toBe(201);
      expect(res.body).toMatchObject({ platform, name: `${platform} bot`, workspace_id: "ws1", credential_fields: Object.keys(credentials).sort() });
      expect(res.body.bot_id).toMatch(/^bot_/);
      expect(res.body.webhook_url).toBe(`${host.url}/v1/webhooks/${platform}/${res.body.bot_id}`);
      const got = await host.admin("GET", `/v1/admin/bots/${res.body.bot_id}`);
      bodies.push(JSON.stringify(got.body));
      expect(got.body).toEqual(res.body);
    }
    const list = await host.admin("GET", "/v1/admin/bots");
    bodies.push(JSON.stringify(list.body));
    expect(list.body.items.length).toBeGreaterThanOrEqual(4);
    for (const secret of SECRETS) for (const body of [...bodies, host.logs()]) expect(body).not.toContain(secret);
  });

  it("refuses credentials that do not fit the platform, naming fields but not values", async () => {
    const missing = await host.admin("POST", "/v1/admin/bots", { platform: "slack", credentials: { bot_token: SLACK.bot_token } });
    expect(missing.status).toBe(400);
    expect(missing.body.error.message).toMatch(/signing_secret/);
    const badKey = await host.admin("POST", "/v1/admin/bots", { platform: "discord", credentials: { ...DISCORD, public_key: "not-hex" } });
    expect(badKey.status).toBe(400);
    expect(badKey.body.error.message).toMatch(/public_key/);
    expect(JSON.stringify(badKey.body)).not.toContain(DISCORD.bot_token);
    const extra = await host.admin("POST", "/v1/admin/bots", { platform: "telegram", credentials: { ...TELEGRAM, password: "hunter2-secret" } });
    expect(extra.status).toBe(400);
    expect(JSON.stringify(extra.body)).not.toContain("hunter2-secret");
    const platform = await host.admin("POST", "/v1/admin/bots", { platform: "irc", credentials: {} });
    expect(platform.status).toBe(400);
    // A user token would post as its user, whose messages carry no bot_id: the bot would answer itself.
    const userToken = await host.admin("POST", "/v1/admin/bots", { platform: "slack", credentials: { ...SLACK, bot_token: "xoxp-1234-user-token-secret" } });
    expect([userToken.status, userToken.body.error.message]).toEqual([400, expect.stringMatching(/bot_token/)]);
    expect(JSON.stringify(userToken.body)).not.toContain("xoxp-1234");
  });

  it("replaces settings with PUT, keeping credentials unless new ones are given, and never changes the platform", async () => {
    const created = await host.admin("POST", "/v1/admin/bots", { bot_id: "put-me", platform: "telegram", name: "before", credentials: TELEGRAM });
    expect(created.status).toBe(201);
    const renamed = await host.admin("PUT", "/v1/admin/bots/put-me", { name: "after", api_base_url: "http://127.0.0.1:9/" });
    expect(renamed.status).toBe(200);
    expect(renamed.body).toMatchObject({ bot_id: "put-me", name: "after", api_base_url: "http://127.0.0.1:9", credential_fields: ["bot_token", "secret_token"] });
    // Kept, and sealed at rest: the stored values are not the credentials, and open to them.
    const [row] = await host.query<{ credentials_json: string }>("SELECT credentials_json FROM bot WHERE bot_id = 'put-me'");
    const stored = JSON.parse(row.credentials_json);
    expect(Object.values(stored).every((v) => String(v).startsWith("sealed:v3:"))).toBe(true);
    expect(row.credentials_json).not.toContain(TELEGRAM.bot_token);
    // Sealed again for the bot's new API origin: a credential opens only for where its row sends it.
    expect(await openValues(box, stored, { table: "bots", id: "put-me", destination: "telegram http://127.0.0.1:9" })).toEqual(TELEGRAM);
    await expect(openValues(box, stored, { table: "bots", id: "put-me", destination: "telegram " })).rejects.toThrow(/endpoint was changed/);
    const rotated = await host.admin("PUT", "/v1/admin/bots/put-me", { credentials: { ...TELEGRAM, secret_token: "rotated-secret-0123456789" } });
    expect(rotated.status).toBe(200);
    const [after] = await host.query<{ credentials_json: string }>("SELECT credentials_json FROM bot WHERE bot_id = 'put-me'");
    // A PUT replaces the settings: without api_base_url the bot is back on the platform's own API, and its new credentials sealed for it.
    expect((await openValues(box, JSON.parse(after.credentials_json), { table: "bots", id: "put-me", destination: "telegram " })).secret_token).toBe("rotated-secret-0123456789");
    expect((await host.admin("PUT", "/v1/admin/bots/put-me", { platform: "slack" })).status).toBe(400);
    expect((await host.admin("POST", "/v1/admin/bots", { bot_id: "put-me", platform: "telegram", credentials: TELEGRAM })).status).toBe(409);
  });

  it("deletes a bot; its webhook and admin routes then answer 404", async () => {
    const created = await host.admin("POST", "/v1/admin/bots", { platform: "slack", credentials: SLACK });
    const id = created.body.bot_id;
    expect((await host.admin("DELETE", `/v1/admin/bots/${id}`)).status).toBe(204);
    expect((await host.admin("GET", `/v1/admin/bots/${id}`)).status).toBe(404);
    expect((await host.admin("DELETE", `/v1/admin/bots/${id}`)).status).toBe(404);
    expect((await fetch(created.body.webhook_url, { method: "POST", body: "{}" })).status).toBe(404);
  });

  it("shows on the bot's view why its last webhook was refused (when, which check), never a secret; a PUT of the view keeps it", async () => {
    const tg = await host.admin("POST", "/v1/admin/bots", { platform: "telegram", credentials: TELEGRAM });
    const slack = await host.admin("POST", "/v1/admin/bots", { platform: "slack", credentials: SLACK });
    // Nothing refused yet: nothing shown.
    expect(tg.body.last_webhook_refusal).toBeUndefined();
    const before = Date.now();
    const forged = await fetch(tg.body.webhook_url, { method: "POST", headers: { "x-telegram-bot-api-secret-token": "a-secret-token-from-elsewhere" }, body: "{}" });
    expect(forged.status).toBe(401);
    const timestamp = String(Math.floor(Date.now() / 1000));
    const signed = await fetch(slack.body.webhook_url, { method: "POST", headers: { "x-slack-request-timestamp": timestamp, "x-slack-signature": `v0=${"0".repeat(64)}` }, body: "{}" });
    expect(signed.status).toBe(401);

    const tgView = await host.admin("GET", `/v1/admin/bots/${tg.body.bot_id}`);
    expect(tgView.body.last_webhook_refusal).toEqual({ at: expect.any(String), reason: "webhook refused: bad or missing X-Telegram-Bot-Api-Secret-Token" });
    expect(Date.parse(tgView.body.last_webhook_refusal.at)).toBeGreaterThanOrEqual(before - 1000);
    const slackView = await host.admin("GET", `/v1/admin/bots/${slack.body.bot_id}`);
    expect(slackView.body.last_webhook_refusal).toMatchObject({ reason: "webhook refused: bad X-Slack-Signature" });
    // The listing shows it too, so one read finds every bot refusing its platform.
    const listed = (await host.admin("GET", "/v1/admin/bots")).body.items.find((b: { bot_id: string }) => b.bot_id === tg.body.bot_id);
    expect(listed.last_webhook_refusal).toEqual(tgView.body.last_webhook_refusal);

    // What GET answered, sent back: taken, and the note is the host's, not undone by the PUT.
    const put = await host.admin("PUT", `/v1/admin/bots/${tg.body.bot_id}`, tgView.body);
    expect(put.status).toBe(200);
    expect(put.body.last_webhook_refusal).toEqual(tgView.body.last_webhook_refusal);
    for (const secret of SECRETS) for (const body of [JSON.stringify([tgView.body, slackView.body]), host.logs()]) expect(body).not.toContain(secret);
  });

  it("writes a bot's refusal note at most every 10 s whatever the reason: a forger alternating the failing check does not write on every request", async () => {
    const slack = await host.admin("POST", "/v1/admin/bots", { platform: "slack", credentials: SLACK });
    const forge = (timestamp: string) => fetch(slack.body.webhook_url, { method: "POST", headers: { "x-slack-request-timestamp": timestamp, "x-slack-signature": `v0=${"0".repeat(64)}` }, body: "{}" });
    const first = await forge(String(Math.floor(Date.now() / 1000)));
    expect(first.status).toBe(401);
    const noted = (await host.admin("GET", `/v1/admin/bots/${slack.body.bot_id}`)).body.last_webhook_refusal;
    expect(noted).toMatchObject({ reason: "webhook refused: bad X-Slack-Signature" });
    // A stale timestamp, then a bad signature again, and so on: each refused, and each logged.
    for (let i = 0; i < 6; i++) expect((await forge(i % 2 === 0 ? "1" : String(Math.floor(Date.now() / 1000)))).status).toBe(401);
    expect((await forge("1")).status).toBe(401);
    // The note is still the first one: the requests after it wrote nothing.
    expect((await host.admin("GET", `/v1/admin/bots/${slack.body.bot_id}`)).body.last_webhook_refusal).toEqual(noted);
    expect(namedLogLines(host.logs(), "webhook.refused").filter((line) => line.bot_id === slack.body.bot_id)).toHaveLength(8);
  });

  it("reads no webhook body before its address names a bot: a chunked body for no bot is answered 404 while it is still arriving", async () => {
    const tg = await host.admin("POST", "/v1/admin/bots", { platform: "telegram", credentials: TELEGRAM });
    const headers = { "x-telegram-bot-api-secret-token": TELEGRAM.secret_token };
    const padding = " ".repeat(64 * 1024);
    for (const url of [`${host.url}/v1/webhooks/telegram/bot_nope`, `${host.url}/v1/webhooks/irc/${tg.body.bot_id}`, `${host.url}/v1/webhooks/slack/${tg.body.bot_id}`]) {
      expect(await stalledChunked(url, headers, padding, padding, 1500)).toEqual({ answeredDuringPause: true, status: 404 });
    }
    // Its own bot's webhook reads the whole chunked body, as before, and takes it.
    expect(await stalledChunked(tg.body.webhook_url, headers, `{"update_id": 777001}${padding}`, padding, 300)).toEqual({ answeredDuringPause: false, status: 200 });
  });

  it("registers and removes webhooks only where the platform's API allows it", async () => {
    const created = await host.admin("POST", "/v1/admin/bots", { platform: "slack", credentials: SLACK });
    for (const method of ["POST", "DELETE"]) {
      const res = await host.admin(method, `/v1/admin/bots/${created.body.bot_id}/webhook`);
      expect(res.status).toBe(400);
      expect(res.body.error.message).toMatch(/developer console/);
    }
  });

  it("has a bot enabled unless registered or PUT with enabled: false; its view says which, and a PUT of the view, or one leaving it out, keeps it", async () => {
    const on = await host.admin("POST", "/v1/admin/bots", { bot_id: "switch-on", platform: "telegram", credentials: TELEGRAM });
    expect([on.status, on.body.enabled]).toEqual([201, true]);
    const off = await host.admin("POST", "/v1/admin/bots", { bot_id: "switch-off", platform: "slack", enabled: false, credentials: SLACK });
    expect([off.status, off.body.enabled]).toEqual([201, false]);
    expect((await host.admin("GET", "/v1/admin/bots/switch-off")).body.enabled).toBe(false);
    const listed = (await host.admin("GET", "/v1/admin/bots")).body.items.filter((b: { bot_id: string }) => b.bot_id.startsWith("switch-"));
    expect(listed.map((b: { bot_id: string; enabled: boolean }) => [b.bot_id, b.enabled])).toEqual([["switch-on", true], ["switch-off", false]]);
    // What GET answered, sent back, keeps it paused; so does a PUT leaving it out, as it keeps the credentials (a
    // configuration pushed again never ends a pause): only `enabled: true` does.
    const kept = await host.admin("PUT", "/v1/admin/bots/switch-off", (await host.admin("GET", "/v1/admin/bots/switch-off")).body);
    expect([kept.status, kept.body.enabled]).toEqual([200, false]);
    const paused = await host.admin("PUT", "/v1/admin/bots/switch-on", { enabled: false });
    expect([paused.status, paused.body.enabled, paused.body.credential_fields]).toEqual([200, false, ["bot_token", "secret_token"]]);
    const pushed = await host.admin("PUT", "/v1/admin/bots/switch-on", { name: "renamed" });
    expect([pushed.status, pushed.body.enabled, pushed.body.name]).toEqual([200, false, "renamed"]);
    expect((await host.admin("PUT", "/v1/admin/bots/switch-on", { enabled: true })).body.enabled).toBe(true);
    expect((await host.admin("PUT", "/v1/admin/bots/switch-on", {})).body.enabled).toBe(true);
    expect((await host.admin("PUT", "/v1/admin/bots/switch-on", { enabled: "no" })).status).toBe(400);
  });

  it("is an operator API: no admin token, no access; a webhook of the wrong platform is not found", async () => {
    expect((await fetch(`${host.url}/v1/admin/bots`)).status).toBe(401);
    const created = await host.admin("POST", "/v1/admin/bots", { platform: "telegram", credentials: TELEGRAM });
    const wrong = await fetch(`${host.url}/v1/webhooks/slack/${created.body.bot_id}`, { method: "POST", headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, body: "{}" });
    expect(wrong.status).toBe(404);
    expect((await fetch(`${host.url}/v1/webhooks/irc/${created.body.bot_id}`, { method: "POST", body: "{}" })).status).toBe(404);
  });
});
