import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT } from "../../local/build";
import { startHost, type LocalHost } from "../../local/host";
import { adminCall } from "../../local/setup";
import { ADMIN_TOKEN, startTestHost, type TestHost } from "../support/host";
import { postToSlackBot, slackBotCreated, slackInstallationsApi } from "../support/slack-signed";
import { startFakePlatform } from "../support/fake-platform";

/**
 * A token Slack refused (auth.test's `invalid_auth`) is kept on the bot's row, and requests do not ask about it again
 * for ten minutes: not for good, as Slack also answers `invalid_auth` for a token just issued, for a while, or for a
 * call from an address the app's token IP restrictions leave out, both fixed with the token as it was. A token PUT
 * again as it was voids the refusal even where it is stored as given (no SECRETS_KEY: nothing stored changes).
 */
const APP_SECRET = "refused-held-app-secret-0123456789";
/** The hub's app's: its bots are siblings of no bot of the other tests. */
const HUB_APP_SECRET = "refused-held-hub-app-secret-01234";
const TOKENS = {
  hub: "xoxb-held-hub-t1-token-000000001",
  /** Refused at first; Slack takes it later (as workspace T9). */
  late: "xoxb-held-late-t9-token-00000009",
  /** Refused at first; Slack takes it later (as workspace T5), a sibling of the hub's app. */
  sibling: "xoxb-held-sibling-t5-token-00005",
  /** Refused at first on the host without SECRETS_KEY; Slack takes it later (as workspace T7). */
  plain: "xoxb-held-plain-t7-token-0000007",
};
/** What auth.test says of each token it takes: any other is `invalid_auth`. */
const installed: Record<string, Record<string, unknown>> = { [TOKENS.hub]: { team_id: "T1", user_id: "UHUB", app_id: "A1" } };
const takesNow = (token: string, team: string) => (installed[token] = { team_id: team, user_id: `U-${team}`, app_id: "A1" });
/** The ten minutes a refusal stands for requests (src/platforms/slack/own-installation.ts), and a second more. */
const HELD_PAST_MS = 10 * 60_000 + 1_000;

let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let host: TestHost;

beforeAll(async () => {
  fake = await startFakePlatform(slackInstallationsApi(installed));
  host = await startTestHost({ captureLogs: true });
});
afterAll(async () => {
  await host?.dispose();
  await fake?.close();
});

let n = 0;
/** A message from workspace `team`, signed as Slack signs the app's requests, sent to `botId`'s address. */
async function sendFrom(to: LocalHost, team: string, botId: string, secret = APP_SECRET) {
  const event = { type: "message", channel: `C-${team}`, channel_type: "channel", user: "U42", text: `hello from ${team}`, ts: `${1_700_000_000 + ++n}.000100`, team };
  const authorizations = [{ enterprise_id: null, team_id: team, user_id: `U-${team}`, is_bot: true, is_enterprise_install: false }];
  const body = JSON.stringify({ token: "legacy", team_id: team, api_app_id: "A1", type: "event_callback", event_id: `EvHeld${n}`, event_time: Math.floor(Date.now() / 1000), authorizations, event });
  return postToSlackBot(to.url, botId, body, { secret });
}
const authTests = (token: string) => fake.calls.filter((c) => c.path === "/auth.test" && c.headers.authorization === `Bearer ${token}`).length;
const register = async (to: LocalHost, botId: string, token: string, secret = APP_SECRET) => expect((await adminCall(to, "POST", "/v1/admin/bots", slackBotCreated(botId, token, secret, fake.url))).status).toBe(201);
const view = async (to: LocalHost, botId: string) => (await adminCall<Record<string, any>>(to, "GET", `/v1/admin/bots/${botId}`)).body;
/** The refusal kept on the bot's row made as old as `ms`: the time a request would otherwise wait out. */
const refusedAgo = (botId: string, ms: number) =>
  host.query("UPDATE bot SET installation_json = json_set(installation_json, '$.unanswered.at', ?) WHERE bot_id = ? AND json_extract(installation_json, '$.unanswered.refused') = 1", [Date.now() - ms, botId]);

describe("a Slack token refused, kept on its bot's row", () => {
  it("is asked again at the bot's own address once the refusal is ten minutes old: Slack may take the same token by then", async () => {
    await register(host, "slack-late", TOKENS.late);
    const refused = await sendFrom(host, "T9", "slack-late");
    expect([refused.status, refused.body.error?.code]).toEqual([503, "platform_unavailable"]);
    expect(authTests(TOKENS.late)).toBe(1);
    expect(await view(host, "slack-late")).toMatchObject({ installation: null, installation_unknown: { reason: "token_refused" } });

    // Slack takes it now; within the ten minutes it is not asked, and the refusal says until when.
    takesNow(TOKENS.late, "T9");
    const held = await sendFrom(host, "T9", "slack-late");
    expect([held.status, authTests(TOKENS.late)]).toEqual([503, 1]);
    expect(held.body.error.message).toMatch(/\(auth\.test, at \S+\), so the request could not be checked: it is not asked again before \d{4}-\S+Z, unless the bot's credentials change \(PUT a working token\)$/);

    await refusedAgo("slack-late", HELD_PAST_MS);
    const taken = await sendFrom(host, "T9", "slack-late");
    expect([taken.status, authTests(TOKENS.late)]).toEqual([200, 2]);
    expect((await view(host, "slack-late")).installation).toMatchObject({ team_id: "T9", app_id: "A1" });
  });

  it("is asked again by a request of its app at another bot's address once the refusal is ten minutes old", async () => {
    await register(host, "slack-hub", TOKENS.hub, HUB_APP_SECRET);
    await register(host, "slack-sibling", TOKENS.sibling, HUB_APP_SECRET);
    const toHub = () => sendFrom(host, "T5", "slack-hub", HUB_APP_SECRET);
    const refused = await toHub();
    expect([refused.status, authTests(TOKENS.sibling)]).toEqual([403, 1]);
    expect(refused.body.error.message).toMatch(/bot slack-sibling of its app here could not be asked which installation it is/);

    takesNow(TOKENS.sibling, "T5");
    expect([(await toHub()).status, authTests(TOKENS.sibling)]).toEqual([403, 1]);

    await refusedAgo("slack-sibling", HELD_PAST_MS);
    expect([(await toHub()).status, authTests(TOKENS.sibling)]).toEqual([200, 2]);
    expect(await host.query("SELECT event_id FROM event_log WHERE bot_id = 'slack-sibling'")).toHaveLength(1);
    expect((await view(host, "slack-sibling")).installation).toMatchObject({ team_id: "T5", app_id: "A1" });
  });

  it("keeps every token and the signing secret out of the logs", () => {
    for (const secret of [APP_SECRET, HUB_APP_SECRET, ...Object.values(TOKENS)]) expect(host.logs()).not.toContain(secret);
  });
});

describe("a Slack token refused, on a host without SECRETS_KEY (credentials stored as given)", () => {
  let plain: LocalHost;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "slack-refused-plain-"));
    plain = await startHost({ adminToken: ADMIN_TOKEN, dbUrl: `file:${join(dir, "host.db")}`, scriptPath: join(ROOT, "dist/test/worker.js") });
  });
  afterAll(async () => {
    await plain?.dispose();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("is asked again once the same token is PUT, though nothing stored of the credentials changes", async () => {
    await register(plain, "slack-plain", TOKENS.plain);
    expect((await sendFrom(plain, "T7", "slack-plain")).status).toBe(503);
    expect(authTests(TOKENS.plain)).toBe(1);
    const stored = async () => (await plain.query<{ credentials_json: string }>("SELECT credentials_json FROM bot WHERE bot_id = 'slack-plain'"))[0].credentials_json;
    const before = await stored();

    // Fixed in Slack (its IP restrictions, say): the operator PUTs the token as it was, as the refusal says to.
    takesNow(TOKENS.plain, "T7");
    const put = await adminCall<Record<string, any>>(plain, "PUT", "/v1/admin/bots/slack-plain", slackBotCreated("slack-plain", TOKENS.plain, APP_SECRET, fake.url));
    expect(put.status).toBe(200);
    expect(await stored()).toBe(before);
    expect(put.body).toMatchObject({ installation: null, installation_unknown: { reason: "not_asked" } });
    expect(await view(plain, "slack-plain")).toMatchObject({ installation: null, installation_unknown: { reason: "not_asked" } });

    expect((await sendFrom(plain, "T7", "slack-plain")).status).toBe(200);
    expect(authTests(TOKENS.plain)).toBe(2);
    expect((await view(plain, "slack-plain")).installation).toMatchObject({ team_id: "T7", app_id: "A1" });
  });
});
