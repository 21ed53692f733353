import { beforeAll, describe, expect, it } from "vitest";
import { useChatHost, type ChatHost } from "../support/chat-host";
import { postToSlackBot, slackBotCreated, slackInstallationsApi, registerSlackBots, webhookRefusal } from "../support/slack-signed";
import { waitFor } from "../support/fake-platform";
import { namedLogLines } from "../support/host";

/**
 * Attempts to make a request reach a sibling it is not for (slack-multi-workspace.test.ts has the hand-overs that
 * should happen). One app (A1) is installed in workspace T1 (slack-hub, at whose address Slack calls), in workspace T7
 * of organization E1 (slack-seven) and organization-wide in E1 (slack-org); slack-impostor is another app's bot in T4.
 */
const APP_SECRET = "sibling-bypass-app-secret-0123456789";
const IMPOSTOR_SECRET = "impostor-app-signing-secret-98765";
const TOKENS = {
  hub: "xoxb-hub-workspace-t1-token-0001",
  org: "xoxb-org-wide-e1-token-000000002",
  seven: "xoxb-seven-in-e1-token-00000003",
  impostor: "xoxb-impostor-t4-token-000000004",
  nine: "xoxb-nine-workspace-t9-token-0005",
  /** Revoked: Slack refuses it (invalid_auth), as it does any token not in INSTALLED. */
  revoked: "xoxb-revoked-sibling-token-00006",
};
/** What auth.test says of each token (the app named for the hub's only). */
const INSTALLED: Record<string, Record<string, unknown>> = {
  [TOKENS.hub]: { team_id: "T1", user_id: "UHUB", app_id: "A1", is_enterprise_install: false },
  [TOKENS.org]: { team_id: "", enterprise_id: "E1", user_id: "UORG", is_enterprise_install: true },
  [TOKENS.seven]: { team_id: "T7", enterprise_id: "E1", user_id: "USEVEN", is_enterprise_install: false },
  [TOKENS.impostor]: { team_id: "T4", user_id: "UIMP", is_enterprise_install: false },
  [TOKENS.nine]: { team_id: "T9", user_id: "UNINE", is_enterprise_install: false },
};
const BOTS: [string, string, string][] = [
  ["slack-hub", TOKENS.hub, APP_SECRET],
  ["slack-org", TOKENS.org, APP_SECRET],
  ["slack-seven", TOKENS.seven, APP_SECRET],
  ["slack-impostor", TOKENS.impostor, IMPOSTOR_SECRET],
];

const app = useChatHost({ api: slackInstallationsApi(INSTALLED), runnerName: "slack-sibling-bypass", ready: () => registerSlackBots(app.host, app.runner, app.fake.url, BOTS) });
let host: ChatHost["host"];
let fake: ChatHost["fake"];
let runner: ChatHost["runner"];
beforeAll(async () => {
  ({ host, fake, runner } = app);
  // The hub knows its installation before any test: each test is about its siblings.
  expect((await send(message({ team: "T1" }, "C-T1", "the hub's own"))).status).toBe(200);
});

const created = (botId: string, token: string, secret: string) => slackBotCreated(botId, token, secret, fake.url);

let n = 0;
let ts = 1_700_000_000;
const now = () => Math.floor(Date.now() / 1000);

/** Signed as Slack signs the app's requests (or with `secret`), sent to the app's one Request URL, slack-hub's. */
const send = (body: string, contentType = "application/json", secret = APP_SECRET) => postToSlackBot(host.url, "slack-hub", body, { secret, contentType });
/** A message event sent for the installation `authorization` says (the envelope's own team and enterprise, `envelope`, default to it). */
function message(authorization: { team: string | null; enterprise?: string; orgWide?: boolean }, channel: string, text: string, envelope: { team?: string; enterprise?: string } = {}) {
  const auth = { enterprise_id: authorization.enterprise ?? null, team_id: authorization.team, user_id: "UBOT", is_bot: true, is_enterprise_install: authorization.orgWide ?? false };
  const event = { type: "message", channel, channel_type: "channel", user: "U42", text, ts: `${++ts}.000100` };
  return JSON.stringify({
    token: "legacy-verification-token", team_id: envelope.team ?? authorization.team, enterprise_id: envelope.enterprise ?? authorization.enterprise, api_app_id: "A1",
    type: "event_callback", event_id: `EvBypass${++n}`, event_time: now(), authorizations: [auth], event,
  });
}
const refusal = webhookRefusal;
const contextsSaying = (text: string) => runner.contexts.filter((c) => c.input.text === text);
const recordedFor = (botId: string) => host.query<{ event_id: string }>("SELECT event_id FROM event_log WHERE bot_id = ? ORDER BY seq", [botId]);
const authTests = (token: string) => fake.calls.filter((c) => c.path === "/auth.test" && c.headers.authorization === `Bearer ${token}`);

describe("Slack siblings: a request goes to no bot it is not for", () => {
  it("hands a press naming neither workspace nor organization to no sibling, however it says which kind of installation it is for", async () => {
    // Refused by the hub as an org-wide install's; it names no organization, so no org-wide sibling is the one.
    const press = { type: "block_actions", api_app_id: "A1", is_enterprise_install: true, user: { id: "U42" }, trigger_id: `${++n}.press`, container: { type: "message", message_ts: "1700000000.000100", channel_id: "C-NONE" }, channel: { id: "C-NONE" }, actions: [{ type: "button", action_id: "go", value: "press naming nothing" }] };
    const refused = await send(new URLSearchParams({ payload: JSON.stringify(press) }).toString(), "application/x-www-form-urlencoded");
    expect([refused.status, refused.noRetry, refused.body]).toEqual([403, "1", refusal("the request is for an organization-wide installation (no Slack organization), not this bot's (team T1)")]);
    expect(await recordedFor("slack-org")).toEqual([]);
    expect(contextsSaying("press naming nothing")).toEqual([]);
    // Nothing was looked up: no sibling was asked which installation it is.
    expect(authTests(TOKENS.org)).toEqual([]);
  });

  it("tells a workspace's installation in an organization from the organization-wide one: each goes to its own bot, never the other kind", async () => {
    expect((await send(message({ team: "T7", enterprise: "E1" }, "C-T7", "for T7's own installation"))).status).toBe(200);
    expect((await send(message({ team: null, enterprise: "E1", orgWide: true }, "C-T7", "for E1's org-wide installation", { team: "T7" }))).status).toBe(200);
    expect((await waitFor(() => contextsSaying("for T7's own installation")[0], 10_000, "T7's run")).conversation.bot_id).toBe("slack-seven");
    expect((await waitFor(() => contextsSaying("for E1's org-wide installation")[0], 10_000, "E1's run")).conversation.bot_id).toBe("slack-org");
    expect(contextsSaying("for T7's own installation")).toHaveLength(1);
    expect(contextsSaying("for E1's org-wide installation")).toHaveLength(1);

    // A shared channel's message from T7 of E1, sent for workspace T8's installation (of no organization, none here): not E1's.
    const shared = await send(message({ team: "T8" }, "C-SHARED", "sent for T8", { team: "T7", enterprise: "E1" }));
    expect([shared.status, shared.body]).toEqual([403, refusal("the request names Slack workspace T8, not this bot's (team T1)")]);
    expect(contextsSaying("sent for T8")).toEqual([]);
  });

  it("never hands a request to a bot whose own signing secret does not verify it, even with the app's digest written on its row (a database writer's doing)", async () => {
    const [hub] = await host.query<{ digest: string }>("SELECT app_secret_digest AS digest FROM bot WHERE bot_id = 'slack-hub'");
    await host.query("UPDATE bot SET app_secret_digest = ? WHERE bot_id = 'slack-impostor'", [hub.digest]);
    const refused = await send(message({ team: "T4" }, "C-T4", "for the impostor's workspace"));
    expect([refused.status, refused.noRetry, refused.body]).toEqual([403, "1", refusal("the request names Slack workspace T4, not this bot's (team T1)")]);
    expect(await recordedFor("slack-impostor")).toEqual([]);
    expect(contextsSaying("for the impostor's workspace")).toEqual([]);
    // The refusal is the hub's, where Slack sent it: the impostor's view blames nothing on its own secret.
    expect((await host.admin("GET", "/v1/admin/bots/slack-impostor")).body.last_webhook_refusal).toBeUndefined();
  });

  it("looks up no sibling for a request its signature does not prove (401): no sibling asked, decrypted or digested; signed, the same request is handed over", async () => {
    expect((await host.admin("POST", "/v1/admin/bots", created("slack-nine", TOKENS.nine, APP_SECRET))).status).toBe(201);
    await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "agent-slack-nine", scope: { type: "bot", id: "slack-nine" } });
    await host.query("UPDATE bot SET app_secret_digest = NULL WHERE bot_id = 'slack-nine'");
    const body = message({ team: "T9" }, "C-T9", "for T9");
    const forged = await send(body, "application/json", "a-guessed-signing-secret-000000");
    expect([forged.status, forged.body.error.code]).toEqual([401, "unauthorized"]);
    expect(authTests(TOKENS.nine)).toEqual([]);
    const [untouched] = await host.query<{ digest: string | null; key: string | null }>("SELECT app_secret_digest AS digest, installation_key AS key FROM bot WHERE bot_id = 'slack-nine'");
    expect(untouched).toEqual({ digest: null, key: null });

    expect((await send(body)).status).toBe(200);
    expect((await waitFor(() => contextsSaying("for T9")[0], 10_000, "T9's run")).conversation.bot_id).toBe("slack-nine");
    expect(authTests(TOKENS.nine)).toHaveLength(1);
  });

  it("asks Slack once about a sibling whose token it refused: the same request sent again (a replay within the 5 minutes, Slack's retry) asks nothing more", async () => {
    expect((await host.admin("POST", "/v1/admin/bots", created("slack-revoked", TOKENS.revoked, APP_SECRET))).status).toBe(201);
    const body = message({ team: "T6" }, "C-T6", "for T6");
    for (let i = 0; i < 3; i++) {
      const refused = await send(body);
      // Named, as it may be the one: the operator looks at it, not at the hub.
      expect([refused.status, refused.noRetry, refused.body]).toEqual([403, "1", refusal("the request names Slack workspace T6, not this bot's (team T1); bot slack-revoked of its app here could not be asked which installation it is (Slack refused its token, or its credentials cannot be read): if it is that one, PUT working credentials")]);
    }
    // The log says so too (the hub's note keeps an earlier refusal: one every 10 s).
    const logged = namedLogLines(host.logs(), "webhook.refused").filter((line) => line.bot_id === "slack-hub" && line.reason.includes("bot slack-revoked of its app here could not be asked"));
    expect(logged.map((line) => [line.status, line.code])).toEqual([[403, "forbidden"], [403, "forbidden"], [403, "forbidden"]]);
    expect(authTests(TOKENS.revoked)).toHaveLength(1);
    expect(await recordedFor("slack-revoked")).toEqual([]);
  });

  it("shows no digest nor installation key in the bots' views, and logs none", async () => {
    const stored = await host.query<{ digest: string | null; key: string | null }>("SELECT app_secret_digest AS digest, installation_key AS key FROM bot");
    const digests = stored.map((r) => r.digest).filter((d): d is string => d !== null);
    expect(digests.length).toBeGreaterThan(0);
    const views = [JSON.stringify((await host.admin("GET", "/v1/admin/bots")).body), ...(await Promise.all(["slack-hub", "slack-org", "slack-seven"].map(async (id) => JSON.stringify((await host.admin("GET", `/v1/admin/bots/${id}`)).body))))];
    for (const seen of [...views, host.logs()]) {
      for (const digest of digests) expect(seen).not.toContain(digest);
      expect(seen).not.toMatch(/app_secret_digest|appSecretDigest|installation_key|installationKey/);
    }
    for (const secret of [APP_SECRET, IMPOSTOR_SECRET, ...Object.values(TOKENS)]) expect(host.logs()).not.toContain(secret);
  });
});
