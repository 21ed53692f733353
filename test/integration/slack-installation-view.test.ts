import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LocalHost } from "../../local/host";
import { adminCall } from "../../local/setup";
import { SECRETS_KEY, startHostOn } from "../support/host";
import { postToSlackBot, slackBotCreated, slackInstallationsApi, webhookRefusal } from "../support/slack-signed";
import { startFakePlatform } from "../support/fake-platform";

/**
 * Which installation each Slack bot is known to be, as its admin view shows it, and a token Slack refused kept on the
 * bot's row, so that no isolate asks it again for ten minutes (./slack-refused-token-held.test.ts), nor the cron until
 * its credentials change. One app (A1), Slack calling slack-hub's address (T1); one data folder, the host started anew
 * on it (a new isolate) between the tests.
 */
const APP_SECRET = "installation-view-app-secret-0123456789";
const TOKENS = {
  hub: "xoxb-view-hub-t1-token-00000001",
  two: "xoxb-view-two-t2-token-00000002",
  three: "xoxb-view-three-t3-token-000003",
  /** Slack refuses it (invalid_auth: not in INSTALLED). */
  revoked: "xoxb-view-revoked-token-0000004",
  /** The working token slack-revoked is given later, of workspace T6. */
  six: "xoxb-view-six-t6-token-00000006",
  lost: "xoxb-view-lost-t7-token-0000007",
  sealed: "xoxb-view-sealed-t8-token-000008",
};
/** What auth.test says of each token: the hub's names no app (it is learned from its first request). */
const INSTALLED: Record<string, Record<string, unknown>> = {
  [TOKENS.hub]: { team_id: "T1", user_id: "UHUB" },
  [TOKENS.two]: { team_id: "T2", user_id: "UTWO", app_id: "A1" },
  [TOKENS.three]: { team_id: "T3", user_id: "UTHREE", app_id: "A1" },
  [TOKENS.six]: { team_id: "T6", user_id: "USIX", app_id: "A1" },
  [TOKENS.lost]: { team_id: "T7", user_id: "ULOST", app_id: "A1" },
  [TOKENS.sealed]: { team_id: "T8", user_id: "USEALED", app_id: "A1" },
};
const TELEGRAM = { bot_token: "123456:view-telegram-token", secret_token: "view-telegram-secret-token" };
/** Another key than the one the bots were sealed under: the host then cannot open them. */
const OTHER_KEY = Buffer.alloc(32, 0x5c).toString("base64");

let dataDir: string;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "slack-installation-view-"));
  fake = await startFakePlatform(slackInstallationsApi(INSTALLED));
});
afterAll(async () => {
  await fake?.close();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

/** A host on the data folder, its logs kept: stopped after `use`, so the next one is a new isolate. */
async function withHost(use: (host: LocalHost, logs: () => string) => Promise<void>, secretsKey = SECRETS_KEY) {
  let logs = "";
  const host = await startHostOn(dataDir, { SECRETS_KEY: secretsKey }, { onRuntimeOutput: (text) => (logs += text) });
  try {
    await use(host, () => logs);
  } finally {
    await host.dispose();
  }
}

let n = 0;
/** A message from workspace `team`, signed as Slack signs the app's requests, sent to `botId`'s address (the hub's: the app's Request URL). */
async function sendFrom(host: LocalHost, team: string, botId = "slack-hub") {
  const event = { type: "message", channel: `C-${team}`, channel_type: "channel", user: "U42", text: `hello from ${team}`, ts: `${1_700_000_000 + ++n}.000100`, team };
  const authorizations = [{ enterprise_id: null, team_id: team, user_id: `U-${team}`, is_bot: true, is_enterprise_install: false }];
  const body = JSON.stringify({ token: "legacy", team_id: team, api_app_id: "A1", type: "event_callback", event_id: `EvView${n}`, event_time: Math.floor(Date.now() / 1000), authorizations, event });
  return postToSlackBot(host.url, botId, body, { secret: APP_SECRET });
}
const view = async (host: LocalHost, botId: string) => (await adminCall<Record<string, any>>(host, "GET", `/v1/admin/bots/${botId}`)).body;
const authTests = (token: string) => fake.calls.filter((c) => c.path === "/auth.test" && c.headers.authorization === `Bearer ${token}`).length;
const recordedFor = (host: LocalHost, botId: string) => host.query<{ event_id: string }>("SELECT event_id FROM event_log WHERE bot_id = ?", [botId]);
const register = async (host: LocalHost, botId: string, token: string) => expect((await adminCall(host, "POST", "/v1/admin/bots", slackBotCreated(botId, token, APP_SECRET, fake.url))).status).toBe(201);
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
/** The refusal of a request for T6 while slack-revoked's token is refused: it may be the one. */
const t6Refused = webhookRefusal("the request names Slack workspace T6, not this bot's (team T1); bot slack-revoked of its app here could not be asked which installation it is (Slack refused its token, or its credentials cannot be read): if it is that one, PUT working credentials");

describe("A Slack bot's installation in its admin view, and a refused token kept", () => {
  it("shows each bot's installation once a request or the cron learned it, why it is not known until then, and keeps a token Slack refused at a request", async () => {
    await withHost(async (host, logs) => {
      await register(host, "slack-hub", TOKENS.hub);
      await register(host, "slack-two", TOKENS.two);
      await register(host, "slack-revoked", TOKENS.revoked);
      expect((await adminCall(host, "POST", "/v1/admin/bots", { bot_id: "tg", platform: "telegram", api_base_url: fake.url, credentials: TELEGRAM })).status).toBe(201);

      // Nothing asked at registration; a Telegram bot has no such field.
      expect(await view(host, "slack-hub")).toMatchObject({ installation: null, installation_unknown: { reason: "not_asked" } });
      const telegram = await view(host, "tg");
      expect(["installation", "installation_unknown"].filter((field) => field in telegram)).toEqual([]);

      // Its own first request: auth.test names the workspace, the request the app.
      expect((await sendFrom(host, "T1")).status).toBe(200);
      const hub = await view(host, "slack-hub");
      expect(hub.installation).toEqual({ team_id: "T1", enterprise_id: null, is_enterprise_install: false, app_id: "A1", learned_at: expect.stringMatching(ISO) });
      expect(hub).not.toHaveProperty("installation_unknown");

      // A request for T6, which no bot here is known to be: the two siblings not known yet are asked.
      const refused = await sendFrom(host, "T6");
      expect([refused.status, refused.body]).toEqual([403, t6Refused]);
      expect(authTests(TOKENS.revoked)).toBe(1);
      expect((await view(host, "slack-two")).installation).toEqual({ team_id: "T2", enterprise_id: null, is_enterprise_install: false, app_id: "A1", learned_at: expect.stringMatching(ISO) });
      const revoked = await view(host, "slack-revoked");
      expect(revoked).toMatchObject({ installation: null, installation_unknown: { reason: "token_refused", at: expect.stringMatching(ISO) } });

      // The cron learns the bot registered since, and does not ask the one a request met refused.
      await register(host, "slack-three", TOKENS.three);
      expect(await view(host, "slack-three")).toMatchObject({ installation: null, installation_unknown: { reason: "not_asked" } });
      await host.triggerScheduled();
      expect((await view(host, "slack-three")).installation).toEqual({ team_id: "T3", enterprise_id: null, is_enterprise_install: false, app_id: "A1", learned_at: expect.stringMatching(ISO) });
      expect(authTests(TOKENS.revoked)).toBe(1);
      expect(await view(host, "slack-revoked")).toEqual(revoked);

      // A view sent back as it is keeps what was learned (no credentials sent: they are kept, and so is it).
      const sentBack = await adminCall<Record<string, any>>(host, "PUT", "/v1/admin/bots/slack-two", await view(host, "slack-two"));
      expect(sentBack.status).toBe(200);
      expect((await view(host, "slack-two")).installation).toMatchObject({ team_id: "T2" });

      // Neither a secret nor a digest, in the listing or any view (nor any secret in the log).
      const stored = await host.query<{ digest: string | null; key: string | null; kept: string | null }>("SELECT app_secret_digest AS digest, installation_key AS key, installation_json AS kept FROM bot");
      const digests = stored.flatMap((r) => [r.digest, r.key, ...[...(r.kept ?? "").matchAll(/"credentials_sha256":"(\w+)"/g)].map((m) => m[1])]).filter((d): d is string => d !== null);
      expect(digests.length).toBeGreaterThan(6);
      const views = [JSON.stringify((await adminCall(host, "GET", "/v1/admin/bots")).body), ...(await Promise.all(["slack-hub", "slack-two", "slack-three", "slack-revoked", "tg"].map(async (id) => JSON.stringify(await view(host, id)))))];
      for (const seen of views) {
        for (const digest of digests) expect(seen).not.toContain(digest);
        expect(seen).not.toMatch(/credentials_sha256|installation_key|app_secret_digest/);
      }
      for (const secret of [APP_SECRET, ...Object.values(TOKENS), ...Object.values(TELEGRAM)]) for (const seen of [...views, logs()]) expect(seen).not.toContain(secret);
    });
  });

  it("asks a token Slack refused no more in a new isolate, at the app's address or the bot's own, nor at the cron; new credentials are asked", async () => {
    await withHost(async (host) => {
      const refused = await sendFrom(host, "T6");
      expect([refused.status, refused.body]).toEqual([403, t6Refused]);
      expect(authTests(TOKENS.revoked)).toBe(1);
      const own = await sendFrom(host, "T6", "slack-revoked");
      expect([own.status, own.body.error.code]).toEqual([503, "platform_unavailable"]);
      expect(authTests(TOKENS.revoked)).toBe(1);
      expect(own.body.error.message).toMatch(/^Slack refused the bot token when asked which workspace it is installed in \(auth\.test, at \d{4}-.*\), so the request could not be checked: it is not asked again before \d{4}-.*Z, unless the bot's credentials change \(PUT a working token\)$/);
      await host.triggerScheduled();
      expect(authTests(TOKENS.revoked)).toBe(1);

      // A working token PUT: not known, never asked of it; the next request for T6 asks it, and is slack-revoked's.
      const put = await adminCall<Record<string, any>>(host, "PUT", "/v1/admin/bots/slack-revoked", slackBotCreated("slack-revoked", TOKENS.six, APP_SECRET, fake.url));
      expect(put.status).toBe(200);
      expect(put.body).toMatchObject({ installation: null, installation_unknown: { reason: "not_asked" } });
      expect(await view(host, "slack-revoked")).toMatchObject({ installation: null, installation_unknown: { reason: "not_asked" } });
      expect((await sendFrom(host, "T6")).status).toBe(200);
      expect(authTests(TOKENS.six)).toBe(1);
      expect(await recordedFor(host, "slack-revoked")).toHaveLength(1);
      expect((await view(host, "slack-revoked")).installation).toMatchObject({ team_id: "T6", app_id: "A1" });
    });
  });

  it("says a bot's credentials cannot be opened under the host's keys once the cron found them so", async () => {
    // Registered (slack-lost then as a release before 0031 left it: not digested); the host then loses the key they were sealed under.
    await withHost(async (host) => {
      await register(host, "slack-lost", TOKENS.lost);
      await host.query("UPDATE bot SET app_secret_digest = NULL WHERE bot_id = 'slack-lost'");
      await register(host, "slack-sealed", TOKENS.sealed);
    });
    await withHost(async (host) => {
      expect(await view(host, "slack-lost")).toMatchObject({ installation: null, installation_unknown: { reason: "not_asked" } });
      await host.triggerScheduled();
      // Found so when digested (no time kept), or when about to be asked.
      expect(await view(host, "slack-lost")).toMatchObject({ installation: null, installation_unknown: { reason: "credentials_unopenable" } });
      expect(await view(host, "slack-sealed")).toMatchObject({ installation: null, installation_unknown: { reason: "credentials_unopenable", at: expect.stringMatching(ISO) } });
      expect([authTests(TOKENS.lost), authTests(TOKENS.sealed)]).toEqual([0, 0]);
    }, OTHER_KEY);
  });
});
