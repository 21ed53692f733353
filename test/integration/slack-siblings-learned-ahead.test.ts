import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { postToSlackBot } from "../support/slack-signed";
import { startChatRunner, startFakePlatform, waitFor, type FakeReply, type PlatformCall } from "../support/fake-platform";

/**
 * The cron learns which installation each Slack bot is ahead of its requests (src/retention/slack-installations.ts):
 * one app (A1) installed in many workspaces, registered as a bot each, Slack calling slack-hub's address (T1). Asked at
 * request time, siblings not known yet cost the request two auth.test calls each time Slack sends it, and Slack stops
 * after three retries.
 */
const APP_SECRET = "learned-ahead-app-secret-0123456789";
/** More than one wave of the cron asks at once (10), and than the ten an invocation once asked in all. */
const WORKSPACES = Array.from({ length: 14 }, (_, i) => `T${i + 2}`);
const token = (name: string) => `xoxb-${name}-token-0123456789`;
/** Slack refuses it (revoked); the flaky one's first auth.test fails as Slack's own error; Slack never answers hanging ones'. */
const REVOKED = token("revoked");
const FLAKY = token("flaky");
const hanging = (i: number) => token(`hanging-${i}`);
/** More than two waves of ten: each wave of them takes the whole 1 s, and the step starts none after 2 s. */
const HANGING_COUNT = 21;

/** What auth.test says of each token. */
const INSTALLED = new Map<string, string>([
  [token("hub"), "T1"],
  ...WORKSPACES.map((team) => [token(team), team] as [string, string]),
  [token("paused"), "T30"],
  [FLAKY, "T31"],
  [token("after"), "T40"],
]);

let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startChatRunner>>;
let posts = 1_800_000_000;
let flakyAsked = 0;

function slackApi(call: PlatformCall): FakeReply | Promise<FakeReply> {
  const bearer = String(call.headers.authorization ?? "").replace(/^Bearer /, "");
  if (call.path === "/auth.test") {
    if (bearer.includes("-hanging-")) return new Promise<FakeReply>(() => {});
    if (bearer === FLAKY && ++flakyAsked === 1) return { json: { ok: false, error: "internal_error" } };
    const team = INSTALLED.get(bearer);
    return { json: team ? { ok: true, url: "https://example.slack.com/", team: "Example", user: "agent", team_id: team, user_id: `U-${team}`, is_enterprise_install: false } : { ok: false, error: "invalid_auth" } };
  }
  if (call.path === "/chat.postMessage") return { json: { ok: true, channel: call.body.channel, ts: `${++posts}.000100` } };
  return { status: 404, json: { ok: false, error: "unknown_method" } };
}

const botIdOf = (team: string) => `slack-${team.toLowerCase()}`;
async function register(botId: string, bearer: string, enabled = true, bound = true) {
  const created = await host.admin("POST", "/v1/admin/bots", { bot_id: botId, platform: "slack", api_base_url: fake.url, enabled, credentials: { bot_token: bearer, signing_secret: APP_SECRET } });
  expect(created.status).toBe(201);
  if (bound) await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: `agent-${botId}`, scope: { type: "bot", id: botId } });
}

beforeAll(async () => {
  fake = await startFakePlatform(slackApi);
  runner = await startChatRunner("slack-siblings-learned-ahead");
  host = await startTestHost({ captureLogs: true });
  await register("slack-hub", token("hub"));
  for (const team of WORKSPACES) await register(botIdOf(team), token(team));
  await register("slack-revoked", REVOKED);
  await register("slack-paused", token("paused"), false);
  await register("slack-flaky", FLAKY);
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

let n = 0;
let ts = 1_700_000_000;

/** A message from workspace `team`, signed as Slack signs the app's requests, sent to the app's one Request URL. */
async function sendFrom(team: string, text: string) {
  const event = { type: "message", channel: `C-${team}`, channel_type: "channel", user: "U42", text, ts: `${++ts}.000100`, team };
  const authorizations = [{ enterprise_id: null, team_id: team, user_id: `U-${team}`, is_bot: true, is_enterprise_install: false }];
  const body = JSON.stringify({ token: "legacy", team_id: team, api_app_id: "A1", type: "event_callback", event_id: `EvAhead${++n}`, event_time: Math.floor(Date.now() / 1000), authorizations, event });
  return (await postToSlackBot(host.url, "slack-hub", body, { secret: APP_SECRET })).status;
}
const authTests = (bearer: string) => fake.calls.filter((c) => c.path === "/auth.test" && c.headers.authorization === `Bearer ${bearer}`).length;
const ranAs = async (text: string) => (await waitFor(() => runner.contexts.find((c) => c.input.text === text), 10_000, `the run of "${text}"`)).conversation.bot_id;
const summaries = () => [...host.logs().matchAll(/^retention: (\{.*\})$/gm)].map((m) => JSON.parse(m[1]) as Record<string, number>);

describe("Slack siblings learned by the cron, ahead of their requests", () => {
  it("asks each enabled bot's auth.test once with its own token (never a paused bot's), so a request for any of fourteen siblings is taken the first time Slack sends it", async () => {
    await host.triggerScheduled();
    expect(Object.fromEntries([token("hub"), ...WORKSPACES.map(token), REVOKED, FLAKY, token("paused")].map((t) => [t, authTests(t)]))).toEqual({
      [token("hub")]: 1, ...Object.fromEntries(WORKSPACES.map((team) => [token(team), 1])), [REVOKED]: 1, [FLAKY]: 1, [token("paused")]: 0,
    });
    expect(summaries().at(-1)).toMatchObject({ botDigests: 0, slackInstallations: 1 + WORKSPACES.length });

    for (const team of [...WORKSPACES].reverse()) {
      expect(await sendFrom(team, `hello from ${team}`)).toBe(200);
      expect(await ranAs(`hello from ${team}`)).toBe(botIdOf(team));
    }
    // Every one was known: the requests asked Slack nothing.
    expect(fake.calls.filter((c) => c.path === "/auth.test")).toHaveLength(3 + WORKSPACES.length);
  });

  it("asks a bot Slack gave no answer for again at the next invocation, and one whose token Slack refused not until its credentials change", async () => {
    await host.triggerScheduled();
    expect([authTests(FLAKY), authTests(REVOKED), authTests(token("paused"))]).toEqual([2, 1, 0]);
    expect(summaries().at(-1)).toMatchObject({ slackInstallations: 1 });
    expect(await sendFrom("T31", "hello from T31")).toBe(200);
    expect(await ranAs("hello from T31")).toBe("slack-flaky");

    // New credentials (the token replaced after the revocation) are asked about.
    expect((await host.admin("PUT", "/v1/admin/bots/slack-revoked", { platform: "slack", api_base_url: fake.url, credentials: { bot_token: token("T2-again"), signing_secret: APP_SECRET } })).status).toBe(200);
    await host.triggerScheduled();
    expect(authTests(token("T2-again"))).toBe(1);
  });

  it("holds the cron no longer than its budget while Slack does not answer, and no bot back behind those: each invocation asks those asked least recently first", async () => {
    for (let i = 0; i < HANGING_COUNT; i++) await register(`slack-hanging-${i}`, hanging(i), true, false);
    await register("slack-after", token("after"));
    await host.triggerScheduled();
    // Two waves at most (each waits its 1 s out): the last of them and the bot after them are left for the next.
    const asked = [...Array(HANGING_COUNT).keys()].map((i) => authTests(hanging(i)));
    expect(asked.every((n) => n <= 1)).toBe(true);
    expect(asked.slice(20)).toEqual([0]);
    expect(authTests(token("after"))).toBe(0);
    await host.triggerScheduled();
    expect(authTests(token("after"))).toBe(1);
    expect(await sendFrom("T40", "hello from T40")).toBe(200);
    expect(await ranAs("hello from T40")).toBe("slack-after");
  });

  it("keeps every token and the signing secret out of the logs", () => {
    for (const secret of [APP_SECRET, ...INSTALLED.keys(), REVOKED, ...[...Array(HANGING_COUNT).keys()].map(hanging)]) expect(host.logs()).not.toContain(secret);
  });
});
