import { beforeAll, describe, expect, it } from "vitest";
import { useChatHost, type ChatHost } from "../support/chat-host";
import { slackInstallationsApi, slackSignedHeaders, webhookRefusal } from "../support/slack-signed";
import { waitFor } from "../support/fake-platform";
import { namedLogLines } from "../support/host";

/**
 * One Slack app installed in three workspaces, two of them (A and B) registered as bots: Slack signs every
 * installation's requests with the app's one signing secret, so a request signed for workspace C passes both bots'
 * signature checks. Sent to either address (within the 5 minutes), it must not run as that bot's event, in its
 * conversation, answered with its token: each bot is the installation Slack's auth.test says its own token is, and a
 * request naming an installation no bot of the app here is, is refused (one naming a sibling's goes to that sibling:
 * slack-multi-workspace.test.ts). The org-wide, flaky and second workspace-A bots are each an app of their own.
 */
const SIGNING_SECRET = "one-app-signing-secret-0123456789";
/** The other apps' signing secrets, by bot (the one app's bots, a and b, have SIGNING_SECRET). */
const OWN_APP_SECRETS: Record<string, string> = { org: "org-app-signing-secret-0123456789", flaky: "flaky-app-signing-secret-01234567", ta: "second-a-app-signing-secret-012345" };
const TOKENS = { a: "xoxb-workspace-a-bot-token-0001", b: "xoxb-workspace-b-bot-token-0002", org: "xoxb-org-wide-bot-token-0003", flaky: "xoxb-flaky-auth-test-token-0004", ta: "xoxb-workspace-a-other-token-0005" };
/** What auth.test says of each token, as Slack answers it (naming no app): workspaces TA, TB, TF; an org-wide install of E1. */
const INSTALLED: Record<string, Record<string, unknown>> = {
  [TOKENS.a]: { team_id: "TA", user_id: "UBOTA", bot_id: "BA", is_enterprise_install: false },
  [TOKENS.b]: { team_id: "TB", user_id: "UBOTB", bot_id: "BB", is_enterprise_install: false },
  [TOKENS.org]: { team_id: "E1", enterprise_id: "E1", user_id: "WBOTO", bot_id: "BO", is_enterprise_install: true },
  [TOKENS.flaky]: { team_id: "TF", user_id: "UBOTF", bot_id: "BF", is_enterprise_install: false },
  // Workspace A's installation again, for the tests after slack-a is given B's token.
  [TOKENS.ta]: { team_id: "TA", user_id: "UBOTA", bot_id: "BA", is_enterprise_install: false },
};
const SECRETS = [SIGNING_SECRET, ...Object.values(OWN_APP_SECRETS), ...Object.values(TOKENS)];

/** auth.test calls the fake answered, by token; the flaky token's first one fails as Slack's own error. */
const asked = new Map<string, number>();
function authTest(token: string) {
  asked.set(token, (asked.get(token) ?? 0) + 1);
  return token === TOKENS.flaky && asked.get(token) === 1 ? { json: { ok: false, error: "internal_error" } } : undefined;
}

const app = useChatHost({
  api: slackInstallationsApi(INSTALLED, authTest),
  runnerName: "slack-installations",
  async ready() {
    for (const [name, token] of Object.entries(TOKENS)) {
      const credentials = { bot_token: token, signing_secret: OWN_APP_SECRETS[name] ?? SIGNING_SECRET };
      await app.addBot({ bot_id: `slack-${name}`, platform: "slack", workspace_id: `ws-${name}`, api_base_url: app.fake.url, credentials }, { agentId: `agent-${name}` });
    }
  },
});
let host: ChatHost["host"];
let fake: ChatHost["fake"];
let runner: ChatHost["runner"];
beforeAll(() => void ({ host, fake, runner } = app));

let n = 0;
let ts = 1_700_000_000;
const now = () => Math.floor(Date.now() / 1000);

/** A request as Slack sends it for an app (the one app of bots a and b by default): signed once, its bytes and headers sent as they are to whichever address. */
const signed = (body: string, contentType = "application/json", secret = SIGNING_SECRET) => ({ body, headers: slackSignedHeaders(secret, body, contentType) });
async function send(botId: string, request: ReturnType<typeof signed>) {
  const res = await fetch(`${host.url}/v1/webhooks/slack/${botId}`, { method: "POST", headers: request.headers, body: request.body });
  return { status: res.status, noRetry: res.headers.get("x-slack-no-retry"), body: await res.text() };
}

/** An event_callback for the installation in workspace `team` (of enterprise `enterprise`, when given) of app A1. */
function envelope(team: string, event: Record<string, unknown>, opts: { enterprise?: string; app?: string } = {}) {
  const authorization = { enterprise_id: opts.enterprise ?? null, team_id: team, user_id: `UBOT${team}`, is_bot: true, is_enterprise_install: opts.enterprise !== undefined };
  return JSON.stringify({ token: "legacy-verification-token", team_id: team, api_app_id: opts.app ?? "A1", type: "event_callback", event_id: `EvInst${++n}`, event_time: now(), authorizations: [authorization], event });
}
const said = (channel: string, text: string) => ({ type: "message", channel, channel_type: "channel", user: "U42", text, ts: `${++ts}.000100` });
const form = (fields: Record<string, string>) => new URLSearchParams(fields).toString();

/** Status, X-Slack-No-Retry and body as parsed (as sent when not JSON: an acknowledgement is empty). */
const answerOf = (res: Awaited<ReturnType<typeof send>>) => [res.status, res.noRetry, res.body.startsWith("{") ? JSON.parse(res.body) : res.body];
const refusal = webhookRefusal;
const contextsSaying = (text: string) => runner.contexts.filter((c) => c.input.text === text);
const recordedFor = (botId: string) => host.query<{ event_id: string }>("SELECT event_id FROM event_log WHERE bot_id = ? ORDER BY seq", [botId]);
const postsWith = (token: string) => fake.calls.filter((c) => c.path === "/chat.postMessage" && c.headers.authorization === `Bearer ${token}`);

describe("Slack: one app installed in two workspaces, registered as two bots sharing its signing secret", () => {
  it("answers the URL challenge and a slash command's ssl_check at either address: they name no workspace, and ask nothing of Slack", async () => {
    for (const botId of ["slack-a", "slack-b"]) {
      const res = await send(botId, signed(JSON.stringify({ token: "legacy-verification-token", challenge: `challenge-${botId}`, type: "url_verification" })));
      expect([res.status, JSON.parse(res.body)]).toEqual([200, { challenge: `challenge-${botId}` }]);
      expect((await send(botId, signed(form({ ssl_check: "1", token: "legacy-verification-token" }), "application/x-www-form-urlencoded"))).status).toBe(200);
    }
    expect([asked.get(TOKENS.a) ?? 0, asked.get(TOKENS.b) ?? 0]).toEqual([0, 0]);
  });

  it("refuses at either address a message signed for workspace C, which neither bot is (403, Slack told not to retry), starting nothing; A's own message at A's address runs, answered with A's token", async () => {
    const request = signed(envelope("TC", said("C-C", "what is on today in C?")));
    const recordedBefore = await recordedFor("slack-b");
    const atB = await send("slack-b", request);
    expect([atB.status, atB.noRetry, JSON.parse(atB.body)]).toEqual([403, "1", refusal("the request names Slack workspace TC, not this bot's (team TB)")]);
    const atAToo = await send("slack-a", request);
    expect([atAToo.status, atAToo.noRetry, JSON.parse(atAToo.body)]).toEqual([403, "1", refusal("the request names Slack workspace TC, not this bot's (team TA)")]);

    const atA = await send("slack-a", signed(envelope("TA", said("C-A", "what is on today?"))));
    expect(atA.status).toBe(200);
    const ctx = await waitFor(() => contextsSaying("what is on today?")[0], 10_000, "A's run");
    expect(ctx.conversation).toMatchObject({ bot_id: "slack-a", workspace_id: "ws-a", conversation_id: "C-A" });
    const answer = await waitFor(() => postsWith(TOKENS.a).find((c) => c.body.channel === "C-A"), 10_000, "A's answer");
    expect(answer.body.text).toBe("echo: what is on today?");

    // Bot B recorded nothing, ran nothing, posted nothing; its view and the log say why, naming no secret.
    expect(await recordedFor("slack-b")).toEqual(recordedBefore);
    expect((await host.admin("GET", "/v1/runs?bot_id=slack-b")).body.items).toEqual([]);
    expect(contextsSaying("what is on today in C?")).toEqual([]);
    expect(contextsSaying("what is on today?")).toHaveLength(1);
    expect(postsWith(TOKENS.b)).toEqual([]);
    const view = await host.admin("GET", "/v1/admin/bots/slack-b");
    expect(view.body.last_webhook_refusal.reason).toBe("webhook refused: the request names Slack workspace TC, not this bot's (team TB)");
    expect(namedLogLines(host.logs(), "webhook.refused").filter((line) => line.bot_id === "slack-b")).toEqual([
      { log: "webhook.refused", status: 403, platform: "slack", bot_id: "slack-b", code: "forbidden", reason: "webhook refused: the request names Slack workspace TC, not this bot's (team TB)" },
    ]);
    for (const secret of SECRETS) expect([host.logs(), atB.body, JSON.stringify(view.body)].join("\n")).not.toContain(secret);
    // Asked once each (A by B's lookup of its app's other bots, its installation not known yet), then kept on the bot's row.
    expect([asked.get(TOKENS.a), asked.get(TOKENS.b)]).toEqual([1, 1]);
  });

  it("refuses at B's address a slash command, a button press and a message shortcut of workspace C, and A takes its own workspace's", async () => {
    const inWorkspace = (team: string, words: string) => [
      signed(form({ token: "legacy-verification-token", team_id: team, team_domain: "a", channel_id: `C-${team}`, channel_name: "general", user_id: "U42", user_name: "ada", command: "/ask", text: `slash ${words}`, api_app_id: "A1", is_enterprise_install: "false", trigger_id: `${++n}.cmd` }), "application/x-www-form-urlencoded"),
      signed(form({ payload: JSON.stringify({ type: "block_actions", api_app_id: "A1", team: { id: team, domain: "a" }, user: { id: "U42", team_id: team }, trigger_id: `${++n}.press`, container: { type: "message", message_ts: "1700000000.000100", channel_id: `C-${team}` }, channel: { id: `C-${team}` }, message: { ts: "1700000000.000100" }, actions: [{ type: "button", action_id: "go", value: `press ${words}` }] }) }), "application/x-www-form-urlencoded"),
      signed(form({ payload: JSON.stringify({ type: "message_action", api_app_id: "A1", team: { id: team }, user: { id: "U42", team_id: team }, channel: { id: `C-${team}` }, callback_id: "summarize", trigger_id: `${++n}.sc`, message_ts: "1700000001.000100", message: { type: "message", user: "U7", ts: "1700000001.000100", text: `shortcut ${words}` } }) }), "application/x-www-form-urlencoded"),
    ];
    const recordedBefore = await recordedFor("slack-b");
    for (const request of inWorkspace("TC", "from C")) {
      const atB = await send("slack-b", request);
      expect([atB.status, atB.noRetry, JSON.parse(atB.body)]).toEqual([403, "1", refusal("the request names Slack workspace TC, not this bot's (team TB)")]);
    }
    for (const request of inWorkspace("TA", "from A")) expect((await send("slack-a", request)).status).toBe(200);
    for (const text of ["slash from A", "press from A", "shortcut from A"]) expect((await waitFor(() => contextsSaying(text)[0], 10_000, text)).conversation.bot_id).toBe("slack-a");
    for (const text of ["slash from C", "press from C", "shortcut from C"]) expect(contextsSaying(text)).toEqual([]);
    expect(await recordedFor("slack-b")).toEqual(recordedBefore);
  });

  it("refuses at B's address workspace C's signed event sent again as a form (the signature covers the body, not its content type): the fields a link in it quotes are not read as B's slash command", async () => {
    // A link someone in workspace C posted: its query, raw in the JSON body, reads as form fields naming workspace B.
    const link = "https://example.com/?q=1&command=%2Fask&text=quoted+in+A&team_id=TB&api_app_id=A1&channel_id=C-B-PRIVATE&user_id=UB-ADMIN&trigger_id=9.quoted&z=";
    const message = { ...said("C-A", `see <${link}>`), blocks: [{ type: "rich_text", elements: [{ type: "rich_text_section", elements: [{ type: "link", url: link }] }] }] };
    const event = signed(envelope("TC", message));
    const asForm = { ...event, headers: { ...event.headers, "content-type": "application/x-www-form-urlencoded" } };
    const recordedBefore = await recordedFor("slack-b");
    const atB = await send("slack-b", asForm);
    expect(answerOf(atB)).toEqual([403, "1", refusal("the request names Slack workspace TC, not this bot's (team TB)")]);
    expect(await recordedFor("slack-b")).toEqual(recordedBefore);
    expect(contextsSaying("quoted in A")).toEqual([]);
    expect(postsWith(TOKENS.b).filter((c) => c.body.channel === "C-B-PRIVATE")).toEqual([]);
  });

  it("reads B's own signed event sent again as a form as the event it is: not as a slash command of whoever and wherever a link in it names", async () => {
    const link = "https://example.com/?q=1&command=%2Fask&text=as+the+admin&team_id=TB&api_app_id=A1&channel_id=C-B-PRIVATE&user_id=UB-ADMIN&trigger_id=9.own&z=";
    const event = signed(envelope("TB", said("C-B", `read <${link}>`)));
    const asForm = { ...event, headers: { ...event.headers, "content-type": "application/x-www-form-urlencoded" } };
    expect((await send("slack-b", asForm)).status).toBe(200);
    // Whichever it was read as runs: the message, or the slash command the link spells.
    const ctx = await waitFor(() => runner.contexts.find((c) => c.input.text?.startsWith("read ") || c.input.text === "as the admin"), 10_000, "the run");
    expect([ctx.input.text?.startsWith("read "), ctx.conversation.conversation_id, ctx.conversation.sender_id]).toEqual([true, "C-B", "U42"]);
    expect(contextsSaying("as the admin")).toEqual([]);
  });

  it("runs B's own workspace's message, and learns its app from it: a request of B's workspace for another app is refused", async () => {
    expect((await send("slack-b", signed(envelope("TB", said("C-B", "hello from B"))))).status).toBe(200);
    expect((await waitFor(() => contextsSaying("hello from B")[0], 10_000, "B's run")).conversation.bot_id).toBe("slack-b");
    await waitFor(() => postsWith(TOKENS.b).find((c) => c.body.channel === "C-B"), 10_000, "B's answer");
    const otherApp = await send("slack-b", signed(envelope("TB", said("C-B", "for another app"), { app: "A9" })));
    expect([otherApp.status, JSON.parse(otherApp.body)]).toEqual([403, refusal("the request names Slack app A9, not this bot's (A1)")]);
    expect(contextsSaying("for another app")).toEqual([]);
  });

  it("learns anew when new credentials are PUT: A's bot given B's workspace token takes B's requests, and refuses A's", async () => {
    const put = await host.admin("PUT", "/v1/admin/bots/slack-a", { platform: "slack", workspace_id: "ws-a", api_base_url: fake.url, credentials: { bot_token: TOKENS.b, signing_secret: SIGNING_SECRET } });
    expect(put.status).toBe(200);
    const ofA = await send("slack-a", signed(envelope("TA", said("C-A", "A after the PUT"))));
    expect([ofA.status, JSON.parse(ofA.body)]).toEqual([403, refusal("the request names Slack workspace TA, not this bot's (team TB)")]);
    expect((await send("slack-a", signed(envelope("TB", said("C-B2", "B at A's address"))))).status).toBe(200);
    expect((await waitFor(() => contextsSaying("B at A's address")[0], 10_000, "the run")).conversation.bot_id).toBe("slack-a");
    expect(contextsSaying("A after the PUT")).toEqual([]);
  });
});

describe("Slack: an org-wide install (Enterprise Grid)", () => {
  const ORG = OWN_APP_SECRETS.org;
  it("takes its organization's requests from any of its workspaces, and refuses a workspace's outside it", async () => {
    const inOrg = signed(envelope("T5", said("C-O", "from workspace T5 of E1"), { enterprise: "E1" }), "application/json", ORG);
    expect((await send("slack-org", inOrg)).status).toBe(200);
    expect((await waitFor(() => contextsSaying("from workspace T5 of E1")[0], 10_000, "the run")).conversation.bot_id).toBe("slack-org");
    const outside = await send("slack-org", signed(envelope("TA", said("C-A", "from a workspace of no organization")), "application/json", ORG));
    expect([outside.status, JSON.parse(outside.body)]).toEqual([403, refusal("the request names no Slack organization, not this bot's (E1, installed organization-wide)")]);
    const command = signed(form({ team_id: "T6", enterprise_id: "E2", channel_id: "C-O", user_id: "U42", command: "/ask", text: "from another organization", api_app_id: "A1", is_enterprise_install: "true", trigger_id: `${++n}.cmd` }), "application/x-www-form-urlencoded", ORG);
    const other = await send("slack-org", command);
    expect([other.status, JSON.parse(other.body)]).toEqual([403, refusal("the request names Slack organization E2, not this bot's (E1, installed organization-wide)")]);
    expect(contextsSaying("from a workspace of no organization")).toEqual([]);
    expect(contextsSaying("from another organization")).toEqual([]);
  });

  it("refuses a shared channel's event sent for workspace A's installation, though its envelope names the organization the message came from (as Slack sends it); A takes it", async () => {
    // A Slack Connect channel between A's workspace (of no organization) and T5 of E1: the envelope names where the
    // message was written, the authorization the installation it was sent for (Slack's own example, bolt-js#935).
    const event = said("C-SHARED", "shared channel, sent for A");
    const body = JSON.stringify({
      token: "legacy-verification-token", team_id: "T5", enterprise_id: "E1", context_team_id: "T5", context_enterprise_id: "E1", api_app_id: "A1", type: "event_callback", event_id: `EvInst${++n}`, event_time: now(),
      authorizations: [{ enterprise_id: null, team_id: "TA", user_id: "UBOTTA", is_bot: true, is_enterprise_install: false }], is_ext_shared_channel: true, event: { ...event, team: "T5" },
    });
    const atOrg = await send("slack-org", signed(body, "application/json", ORG));
    expect(answerOf(atOrg)).toEqual([403, "1", refusal("the request names no Slack organization, not this bot's (E1, installed organization-wide)")]);
    expect((await send("slack-ta", signed(body, "application/json", OWN_APP_SECRETS.ta))).status).toBe(200);
    expect((await waitFor(() => contextsSaying("shared channel, sent for A")[0], 10_000, "A's run")).conversation.bot_id).toBe("slack-ta");
    expect(contextsSaying("shared channel, sent for A")).toHaveLength(1);
  });

  it("refuses a modal of workspace A's installation submitted by a user of its organization: the payload's team and enterprise are the user's, its view and is_enterprise_install the installation's", async () => {
    const payload = {
      type: "view_submission", api_app_id: "A1", is_enterprise_install: false, team: { id: "T5", domain: "e1-t5", enterprise_id: "E1" }, enterprise: { id: "E1", name: "E1" },
      user: { id: "W42", team_id: "T5" }, trigger_id: `${++n}.view`, view: { id: "V1", type: "modal", callback_id: "ask", app_installed_team_id: "TA", team_id: "T5", state: { values: {} } },
    };
    const request = (secret: string) => signed(form({ payload: JSON.stringify(payload) }), "application/x-www-form-urlencoded", secret);
    const recordedBefore = await recordedFor("slack-org");
    const atOrg = await send("slack-org", request(ORG));
    expect(answerOf(atOrg)).toEqual([403, "1", refusal("the request is for a workspace's installation (Slack workspace TA), not this bot's (E1, installed organization-wide)")]);
    expect(await recordedFor("slack-org")).toEqual(recordedBefore);
    expect((await send("slack-ta", request(OWN_APP_SECRETS.ta))).status).toBe(200);
  });
});

describe("Slack: a bot whose installation Slack does not say", () => {
  it("refuses the request with a 503 Slack sends again, recording nothing; the request sent again once auth.test answers runs", async () => {
    const request = signed(envelope("TF", said("C-F", "while auth.test fails")), "application/json", OWN_APP_SECRETS.flaky);
    const first = await send("slack-flaky", request);
    expect(first.status).toBe(503);
    expect(first.noRetry).toBeNull();
    expect(JSON.parse(first.body).error.code).toBe("platform_unavailable");
    expect(await recordedFor("slack-flaky")).toEqual([]);
    expect((await send("slack-flaky", request)).status).toBe(200);
    expect((await waitFor(() => contextsSaying("while auth.test fails")[0], 10_000, "the run")).conversation.bot_id).toBe("slack-flaky");
  });
});
