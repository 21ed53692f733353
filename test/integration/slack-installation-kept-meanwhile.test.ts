import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { INSTALLATION_WRITE, postToSlackBot } from "../support/slack-signed";
import { holdNextQuery } from "../support/held-query";
import { startFakePlatform, type FakeReply, type PlatformCall } from "../support/fake-platform";

/**
 * What the cron learns of a Slack bot's installation (src/retention/slack-installations.ts) is written only over the
 * row as it read it: a request that kept the bot's installation while the cron's auth.test was in flight kept the app
 * it named too (auth.test names none for a bot token), and the cron's answer must not drop it. Dropped, the next
 * request naming another app (one signing secret shared by two apps, by mistake) would be taken, and that app kept.
 */
const APP_SECRET = "kept-meanwhile-app-secret-0123456789";
const TOKEN = "xoxb-kept-meanwhile-token-0123456789";
const BOT = "slack-kept-meanwhile";

let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let asked = 0;

async function slackApi(call: PlatformCall): Promise<FakeReply> {
  if (call.path !== "/auth.test") return { status: 404, json: { ok: false, error: "unknown_method" } };
  asked++;
  return { json: { ok: true, url: "https://example.slack.com/", team: "Example", user: "agent", team_id: "T1", user_id: "U-T1", is_enterprise_install: false } };
}

beforeAll(async () => {
  fake = await startFakePlatform(slackApi);
  host = await startTestHost({ captureLogs: true });
  const created = await host.admin("POST", "/v1/admin/bots", { bot_id: BOT, platform: "slack", api_base_url: fake.url, credentials: { bot_token: TOKEN, signing_secret: APP_SECRET } });
  expect(created.status).toBe(201);
});
afterAll(async () => {
  await host?.dispose();
  await fake?.close();
});

let n = 0;
/** A message from the bot's own workspace, signed with the app's secret, naming `app`. */
async function sendNaming(app: string) {
  const event = { type: "message", channel: "C1", channel_type: "channel", user: "U42", text: `hello ${++n}`, ts: `${1_700_000_000 + n}.000100`, team: "T1" };
  const authorizations = [{ enterprise_id: null, team_id: "T1", user_id: "U-T1", is_bot: true, is_enterprise_install: false }];
  const body = JSON.stringify({ token: "legacy", team_id: "T1", api_app_id: app, type: "event_callback", event_id: `EvKept${n}`, event_time: Math.floor(Date.now() / 1000), authorizations, event });
  return (await postToSlackBot(host.url, BOT, body, { secret: APP_SECRET })).status;
}
const summaries = () => [...host.logs().matchAll(/^retention: (\{.*\})$/gm)].map((m) => JSON.parse(m[1]) as Record<string, number>);

describe("the cron's answer for a Slack bot whose installation a request kept meanwhile", () => {
  it("leaves what the request kept (the app it named): a request naming another app is still refused", async () => {
    // The cron's answer to its auth.test is held on its way to the row (the first such write), for as long as the
    // request takes: the order is made, not waited for.
    const hold = holdNextQuery(host, INSTALLATION_WRITE);
    const cron = host.triggerScheduled();
    await hold.heldFrom(cron.then(() => ({ status: 200, body: "the cron's invocation" })));
    // Read by the cron before: the request asks auth.test itself, and keeps the installation with app A1.
    expect(await sendNaming("A1")).toBe(200);
    hold.release();
    await cron;
    // The cron had its answer: it was written, or not, after the request's.
    expect(summaries().at(-1)).toMatchObject({ slackInstallations: 1 });
    expect(await sendNaming("A2")).toBe(403);
    expect(asked).toBe(2);
  });
});
