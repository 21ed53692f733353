import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { INSTALLATION_WRITE, slackBotCreated, slackInstallationsApi } from "../support/slack-signed";
import { startFakePlatform, type FakeReply } from "../support/fake-platform";

/**
 * The cron that learns Slack bots' installations ahead (src/retention/slack-installations.ts) when what it asks or
 * writes fails: a failure that is not Slack refusing the token is asked about again at the next invocation (only a
 * refused token waits for new credentials), and a bot whose answer could not be kept is asked once an invocation, not
 * again by each of its later waves.
 */
const APP_SECRET = "cron-faults-app-secret-0123456789";
const token = (name: string) => `xoxb-${name}-token-0123456789`;
/** Its first auth.test is refused by something in front of Slack (HTTP 403, no Slack error). */
const PROXIED = token("proxied");
/** Its first auth.test says the workspace is moving into an organization (Slack's own, passing, error). */
const MIGRATING = token("migrating");
/** Slack refuses it: not asked again until its credentials change. */
const REVOKED = token("revoked");
/** Its answer is asked while the database refuses to keep it. */
const UNKEPT = token("unkept");

const installed: Record<string, Record<string, unknown>> = {
  [PROXIED]: { team_id: "T1", user_id: "U-T1" },
  [MIGRATING]: { team_id: "T2", user_id: "U-T2" },
  [UNKEPT]: { team_id: "T3", user_id: "U-T3" },
};
const firstAnswers = new Map<string, FakeReply>([
  [PROXIED, { status: 403, json: { message: "forbidden by the egress proxy" } }],
  [MIGRATING, { json: { ok: false, error: "team_added_to_org" } }],
]);

let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;

beforeAll(async () => {
  const slack = slackInstallationsApi(installed, (bearer) => {
    const first = firstAnswers.get(bearer);
    firstAnswers.delete(bearer);
    return first;
  });
  fake = await startFakePlatform(slack);
  host = await startTestHost({ captureLogs: true });
});
/** No query failed any more (a failure drill armed for more than a test used is never left to the next). */
const disarmed = () => host?.databaseOutage({ queries: 0 });
afterEach(disarmed);
afterAll(async () => {
  await host?.dispose();
  await fake?.close();
});

const register = async (botId: string, bearer: string) => expect((await host.admin("POST", "/v1/admin/bots", slackBotCreated(botId, bearer, APP_SECRET, fake.url))).status).toBe(201);
const authTests = (bearer: string) => fake.calls.filter((c) => c.path === "/auth.test" && c.headers.authorization === `Bearer ${bearer}`).length;
const keys = async () => Object.fromEntries((await host.query<{ bot_id: string; installation_key: string | null }>("SELECT bot_id, installation_key FROM bot ORDER BY bot_id")).map((r) => [r.bot_id, r.installation_key]));

describe("the Slack installations cron, when asking or keeping fails", () => {
  it("asks again at the next invocation a bot Slack's answer did not refuse the token of (a proxy's 403, a workspace moving): only a refused token waits for new credentials", async () => {
    await register("slack-proxied", PROXIED);
    await register("slack-migrating", MIGRATING);
    await register("slack-revoked", REVOKED);
    await host.triggerScheduled();
    expect([authTests(PROXIED), authTests(MIGRATING), authTests(REVOKED)]).toEqual([1, 1, 1]);
    await host.triggerScheduled();
    expect([authTests(PROXIED), authTests(MIGRATING), authTests(REVOKED)]).toEqual([2, 2, 1]);
    expect(await keys()).toMatchObject({ "slack-proxied": "team:T1", "slack-migrating": "team:T2", "slack-revoked": null });
  });

  it("asks a bot whose answer the database would not keep once an invocation, not again by each later wave", async () => {
    await register("slack-unkept", UNKEPT);
    // The installation's write fails (each attempt at it): the bot stays not known all through the invocation.
    host.databaseOutage({ queries: 1_000, matching: INSTALLATION_WRITE });
    await host.triggerScheduled();
    expect(authTests(UNKEPT)).toBe(1);
    expect(host.logs()).toMatch(/bot slack-unkept: its installation was not kept/);
    disarmed();
    await host.triggerScheduled();
    expect(authTests(UNKEPT)).toBe(2);
    expect(await keys()).toMatchObject({ "slack-unkept": "team:T3" });
  });

  it("keeps every token and the signing secret out of the logs", () => {
    for (const secret of [APP_SECRET, PROXIED, MIGRATING, REVOKED, UNKEPT]) expect(host.logs()).not.toContain(secret);
  });
});
