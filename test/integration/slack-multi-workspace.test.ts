import { beforeAll, describe, expect, it } from "vitest";
import { useChatHost, type ChatHost } from "../support/chat-host";
import { postToSlackBot, slackBotCreated, slackInstallationsApi, registerSlackBots, webhookRefusal } from "../support/slack-signed";
import { waitFor } from "../support/fake-platform";
import { namedLogLines } from "../support/host";

/**
 * One Slack app (A1) distributed to several workspaces, registered here as one bot per installation, each with its
 * installation's bot token and the app's one signing secret. Slack calls the one Request URL the app has, bot
 * slack-one's (workspace T1): a request from T2 there runs exactly as if it had come to slack-two's own address. Only
 * a bot of the same app (its own signing secret) whose own token says it is that installation takes it.
 */
const APP_SECRET = "multi-workspace-app-secret-0123456789";
/** Another app, installed in T2 too: its bot must never take the first app's requests. */
const OTHER_APP_SECRET = "another-app-signing-secret-9876543210";
const TOKENS = {
  one: "xoxb-one-workspace-t1-token-0001",
  other: "xoxb-other-app-in-t2-token-0002",
  two: "xoxb-two-workspace-t2-token-0003",
  three: "xoxb-three-wrong-app-token-0004",
  five: "xoxb-five-flaky-auth-token-0005",
  twoRotated: "xoxb-two-rotated-t2-token-0006",
  twoAgain: "xoxb-two-again-t2-token-00007",
};
/** What auth.test says of each token. Slack names the app for some tokens only; three's says another app (A9). */
const INSTALLED: Record<string, Record<string, unknown>> = {
  [TOKENS.one]: { team_id: "T1", user_id: "UBOT1", app_id: "A1" },
  [TOKENS.other]: { team_id: "T2", user_id: "UOTHER", app_id: "A2" },
  [TOKENS.two]: { team_id: "T2", user_id: "UBOT2" },
  [TOKENS.three]: { team_id: "T3", user_id: "UBOT3", app_id: "A9" },
  [TOKENS.five]: { team_id: "T5", user_id: "UBOT5" },
  [TOKENS.twoRotated]: { team_id: "T2", user_id: "UBOT2" },
  [TOKENS.twoAgain]: { team_id: "T2", user_id: "UBOT2B" },
};
/** Registration order: the other app's bot in T2 before slack-two, so no order could make it the one chosen. */
const BOTS: [string, string, string][] = [
  ["slack-one", TOKENS.one, APP_SECRET],
  ["slack-other-app", TOKENS.other, OTHER_APP_SECRET],
  ["slack-two", TOKENS.two, APP_SECRET],
  ["slack-three", TOKENS.three, APP_SECRET],
  ["slack-five", TOKENS.five, APP_SECRET],
];
const SECRETS = [APP_SECRET, OTHER_APP_SECRET, ...Object.values(TOKENS)];

/** auth.test calls for five's token: the first fails as Slack's own error. */
let fiveAsked = 0;

const slackApi = slackInstallationsApi(INSTALLED, (token) => (token === TOKENS.five && ++fiveAsked === 1 ? { json: { ok: false, error: "internal_error" } } : undefined));
const app = useChatHost({ api: slackApi, runnerName: "slack-multi-workspace", ready: () => registerSlackBots(app.host, app.runner, app.fake.url, BOTS) });
const { answered } = app;
let host: ChatHost["host"];
let fake: ChatHost["fake"];
let runner: ChatHost["runner"];
beforeAll(() => void ({ host, fake, runner } = app));

const created = (botId: string, token: string, secret: string) => slackBotCreated(botId, token, secret, fake.url);

let n = 0;
let ts = 1_700_000_000;
const now = () => Math.floor(Date.now() / 1000);

/** Signed as Slack signs the app's requests, and sent to the app's one Request URL (slack-one's) unless told. */
async function send(body: string, contentType = "application/json", to = "slack-one", secret = APP_SECRET) {
  const answer = await postToSlackBot(host.url, to, body, { secret, contentType });
  answered.push(answer.text);
  return answer;
}
/** A message in `channel` of workspace `team`, as the app's installation there gets it. */
function message(team: string, channel: string, text: string, app = "A1") {
  const authorizations = [{ enterprise_id: null, team_id: team, user_id: `UBOT-${team}`, is_bot: true, is_enterprise_install: false }];
  const event = { type: "message", channel, channel_type: "channel", user: "U42", text, ts: `${++ts}.000100`, team };
  return { ts: event.ts, body: JSON.stringify({ token: "legacy-verification-token", team_id: team, api_app_id: app, type: "event_callback", event_id: `EvMulti${++n}`, event_time: now(), authorizations, event }) };
}
const form = (fields: Record<string, string>) => new URLSearchParams(fields).toString();
const slash = (team: string, channel: string, text: string) =>
  form({ token: "legacy-verification-token", team_id: team, channel_id: channel, channel_name: "general", user_id: "U42", user_name: "ada", command: "/ask", text, api_app_id: "A1", is_enterprise_install: "false", response_url: `${fake.url}/response/${++n}`, trigger_id: `${++n}.cmd` });

const refusal = webhookRefusal;
const contextsSaying = (text: string) => runner.contexts.filter((c) => c.input.text === text);
const recordedFor = (botId: string) => host.query<{ event_id: string; raw_ref: string | null }>("SELECT event_id, raw_ref FROM event_log WHERE bot_id = ? AND event_type = 'message.received' ORDER BY seq", [botId]);
const callsWith = (token: string, path: string) => fake.calls.filter((c) => c.path === path && c.headers.authorization === `Bearer ${token}`);
const runsOf = async (botId: string) => (await host.admin("GET", `/v1/runs?bot_id=${botId}`)).body.items as { agent_id: string; status: string }[];
const event = async (eventId: string) => (await host.admin("GET", `/v1/events/${encodeURIComponent(eventId)}`)).body;

describe("Slack: one app installed in several workspaces, its Request URL at one bot's address", () => {
  it("runs an event from workspace T2 as slack-two: its agent, its conversation, its raw payload, its token posting the answer in T2; slack-two is asked which installation it is with its own token, once", async () => {
    const fromT2 = message("T2", "C-T2", "hello from T2");
    expect((await send(fromT2.body)).status).toBe(200);
    const ctx = await waitFor(() => contextsSaying("hello from T2")[0], 10_000, "slack-two's run");
    expect(ctx.conversation).toMatchObject({ bot_id: "slack-two", workspace_id: "ws-slack-two", conversation_id: "C-T2" });
    const answer = await waitFor(() => callsWith(TOKENS.two, "/chat.postMessage").find((c) => c.body.channel === "C-T2"), 10_000, "slack-two's answer");
    expect(answer.body.text).toBe("echo: hello from T2");
    expect((await runsOf("slack-two")).map((r) => r.agent_id)).toEqual(["agent-slack-two"]);
    const [recorded] = await recordedFor("slack-two");
    expect(recorded.event_id).toBe(`slack:slack-two:msg:C-T2:${fromT2.ts}`);
    expect(recorded.raw_ref).toMatch(/^raw\/slack\/slack-two\//);
    // slack-one recorded, ran and posted nothing of it, and was refused nothing.
    expect(await recordedFor("slack-one")).toEqual([]);
    expect(await runsOf("slack-one")).toEqual([]);
    expect(callsWith(TOKENS.one, "/chat.postMessage")).toEqual([]);
    expect((await host.admin("GET", "/v1/admin/bots/slack-one")).body.last_webhook_refusal).toBeUndefined();
    // Each token asked once: slack-one's by its own check, slack-two's by the lookup; the other app's never.
    expect([callsWith(TOKENS.one, "/auth.test").length, callsWith(TOKENS.two, "/auth.test").length, callsWith(TOKENS.other, "/auth.test").length]).toEqual([1, 1, 0]);

    // Kept: the next one asks Slack nothing; slack-one's own workspace's message stays slack-one's.
    expect((await send(message("T2", "C-T2", "again from T2").body)).status).toBe(200);
    expect((await send(message("T1", "C-T1", "hello from T1").body)).status).toBe(200);
    expect((await waitFor(() => contextsSaying("again from T2")[0], 10_000, "the second run")).conversation.bot_id).toBe("slack-two");
    expect((await waitFor(() => contextsSaying("hello from T1")[0], 10_000, "slack-one's run")).conversation.bot_id).toBe("slack-one");
    await waitFor(() => callsWith(TOKENS.one, "/chat.postMessage").find((c) => c.body.channel === "C-T1"), 10_000, "slack-one's answer");
    expect([callsWith(TOKENS.one, "/auth.test").length, callsWith(TOKENS.two, "/auth.test").length]).toEqual([1, 1]);
  });

  it("runs a slash command and a press on an ephemeral message from T2 as slack-two: the command's answer posted with its token, the press's shown to its user alone with its token", async () => {
    const command = await send(slash("T2", "C-T2-CMD", "slash from T2"), "application/x-www-form-urlencoded");
    expect([command.status, command.body]).toEqual([200, { response_type: "in_channel" }]);
    const press = { type: "block_actions", api_app_id: "A1", team: { id: "T2" }, user: { id: "U42", team_id: "T2" }, trigger_id: `${++n}.press`, container: { type: "message", message_ts: "1700000000.000100", channel_id: "C-T2-EPH", is_ephemeral: true }, channel: { id: "C-T2-EPH" }, actions: [{ type: "button", action_id: "go", value: "press from T2" }] };
    expect((await send(form({ payload: JSON.stringify(press) }), "application/x-www-form-urlencoded")).status).toBe(200);
    for (const text of ["slash from T2", "press from T2"]) expect((await waitFor(() => contextsSaying(text)[0], 10_000, text)).conversation.bot_id).toBe("slack-two");
    expect((await waitFor(() => callsWith(TOKENS.two, "/chat.postMessage").find((c) => c.body.channel === "C-T2-CMD"), 10_000, "the command's answer")).body.text).toBe("echo: slash from T2");
    const privately = await waitFor(() => callsWith(TOKENS.two, "/chat.postEphemeral")[0], 10_000, "the press's answer");
    expect([privately.body.channel, privately.body.user, privately.body.text]).toEqual(["C-T2-EPH", "U42", "echo: press from T2"]);
    expect(fake.calls.filter((c) => c.headers.authorization === `Bearer ${TOKENS.one}` && c.path !== "/auth.test" && c.path !== "/chat.postMessage")).toEqual([]);
  });

  it("answers 503 (which Slack sends again) while a sibling's auth.test fails, recording nothing; sent again, the sibling is known and runs it", async () => {
    const fromT5 = message("T5", "C-T5", "hello from T5");
    const first = await send(fromT5.body);
    expect([first.status, first.noRetry, first.body.error.code]).toEqual([503, null, "platform_unavailable"]);
    expect(await recordedFor("slack-five")).toEqual([]);
    expect((await send(fromT5.body)).status).toBe(200);
    expect((await waitFor(() => contextsSaying("hello from T5")[0], 10_000, "slack-five's run")).conversation.bot_id).toBe("slack-five");
  });

  it("never hands a request to a sibling whose own token says another app (a signing secret shared by mistake): 403, Slack told not to retry", async () => {
    for (const app of ["A1", "A9"]) {
      const refused = await send(message("T3", "C-T3", `for T3 of ${app}`, app).body);
      expect([refused.status, refused.noRetry]).toEqual([403, "1"]);
      expect(refused.body.error.code).toBe("forbidden");
    }
    expect(callsWith(TOKENS.three, "/auth.test")).toHaveLength(1);
    expect(await recordedFor("slack-three")).toEqual([]);
    expect([...contextsSaying("for T3 of A1"), ...contextsSaying("for T3 of A9")]).toEqual([]);
  });

  it("answers a paused sibling's requests as a paused bot does: recorded as slack-two's, run by nothing, the user told", async () => {
    const paused = await host.admin("PUT", "/v1/admin/bots/slack-two", { ...created("slack-two", TOKENS.two, APP_SECRET), credentials: undefined, enabled: false });
    expect(paused.status).toBe(200);
    const command = await send(slash("T2", "C-T2-PAUSED", "while paused"), "application/x-www-form-urlencoded");
    expect([command.status, command.body]).toEqual([200, { response_type: "ephemeral", text: "This app is paused; try again later." }]);
    const [recorded] = await host.query<{ event_id: string }>("SELECT event_id FROM event_log WHERE bot_id = 'slack-two' AND conversation_id = 'C-T2-PAUSED'");
    expect((await event(recorded.event_id)).disposition).toBe("bot_disabled");
    expect(contextsSaying("while paused")).toEqual([]);
    expect((await host.admin("PUT", "/v1/admin/bots/slack-two", { ...created("slack-two", TOKENS.two, APP_SECRET), credentials: undefined, enabled: true })).status).toBe(200);
  });

  it("finds a sibling again after its token is replaced (the installation asked anew with the new token), and one registered before the lookup existed (no digest, its installation not keyed)", async () => {
    expect((await host.admin("PUT", "/v1/admin/bots/slack-two", created("slack-two", TOKENS.twoRotated, APP_SECRET))).status).toBe(200);
    expect((await send(message("T2", "C-T2-ROT", "after the new token").body)).status).toBe(200);
    expect((await waitFor(() => contextsSaying("after the new token")[0], 10_000, "the run")).conversation.bot_id).toBe("slack-two");
    await waitFor(() => callsWith(TOKENS.twoRotated, "/chat.postMessage").find((c) => c.body.channel === "C-T2-ROT"), 10_000, "the answer with the new token");
    expect(callsWith(TOKENS.twoRotated, "/auth.test")).toHaveLength(1);

    // As the release before left its row: its installation kept without a key, and no digest.
    await host.query("UPDATE bot SET app_secret_digest = NULL, installation_key = NULL WHERE bot_id = 'slack-two'");
    expect((await send(message("T2", "C-T2-OLD", "to the older row").body)).status).toBe(200);
    expect((await waitFor(() => contextsSaying("to the older row")[0], 10_000, "the run")).conversation.bot_id).toBe("slack-two");
    const [row] = await host.query<{ digest: string | null; key: string | null }>("SELECT app_secret_digest AS digest, installation_key AS key FROM bot WHERE bot_id = 'slack-two'");
    expect([row.digest?.length, row.key]).toEqual([64, "team:T2"]);
    expect(callsWith(TOKENS.twoRotated, "/auth.test")).toHaveLength(1);
  });

  it("refuses a request two bots here are the installation of, until one goes", async () => {
    expect((await host.admin("POST", "/v1/admin/bots", created("slack-two-again", TOKENS.twoAgain, APP_SECRET))).status).toBe(201);
    // Known once its own address is called (as the app's URL once was).
    expect((await send(message("T2", "C-T2-AGAIN", "at its own address").body, "application/json", "slack-two-again")).status).toBe(200);
    const both = await send(message("T2", "C-T2", "which of the two?").body);
    expect([both.status, both.noRetry, both.body]).toEqual([403, "1", refusal("more than one bot here is the installation it names (slack-two, slack-two-again): delete all but one")]);
    expect(namedLogLines(host.logs(), "webhook.refused")).toContainEqual({ log: "webhook.refused", status: 403, platform: "slack", bot_id: "slack-one", code: "forbidden", reason: both.body.error.message });
    expect((await host.admin("DELETE", "/v1/admin/bots/slack-two-again")).status).toBe(204);
    expect((await send(message("T2", "C-T2", "one of them again").body)).status).toBe(200);
    expect((await waitFor(() => contextsSaying("one of them again")[0], 10_000, "the run")).conversation.bot_id).toBe("slack-two");
  });

  it("refuses T2's requests once slack-two is deleted, as its own address would: the other app's bot in T2 is never chosen, its token never used", async () => {
    expect((await host.admin("DELETE", "/v1/admin/bots/slack-two")).status).toBe(204);
    const refused = await send(message("T2", "C-T2", "after the delete").body);
    expect([refused.status, refused.noRetry, refused.body]).toEqual([403, "1", refusal("the request names Slack workspace T2, not this bot's (team T1)")]);
    expect(await recordedFor("slack-other-app")).toEqual([]);
    expect(fake.calls.filter((c) => c.headers.authorization === `Bearer ${TOKENS.other}`)).toEqual([]);
    expect(contextsSaying("after the delete")).toEqual([]);
  });

  it("keeps every secret out of answers and logs", () => {
    for (const secret of SECRETS) expect([host.logs(), ...answered].join("\n")).not.toContain(secret);
  });
});
