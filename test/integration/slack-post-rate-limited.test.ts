import { describe, expect, it } from "vitest";
import { useChatHost } from "../support/chat-host";
import { waitFor, type FakeReply, type PlatformCall } from "../support/fake-platform";
import { SLACK_AUTH_TEST } from "../support/slack-events";
import { slackSignedHeaders } from "../support/slack-signed";

/** Slack's chat.postMessage `rate_limited` error (HTTP 200, nothing posted) is a rate limit waited out, not a permanent failure. */
const BOT_TOKEN = "xoxb-TEST-slack-bot-token-deliv";
const SIGNING_SECRET = "slack-signing-secret-deliv-0123456789";
/** Channels whose first chat.postMessage Slack refuses with HTTP 200 {ok:false, error:"rate_limited"} (chat.postMessage's documented "posted too many messages"). */
const postLimited = new Set<string>();
/** Channels whose first chat.postMessage Slack answers HTTP 429 with this Retry-After header (made as it answers). */
const retryAfterHeader = new Map<string, string | (() => string)>();

let ts = 1_700_000_000;

function slackApi(call: PlatformCall): FakeReply {
  // Who the bot token is (its workspace T1, as the envelopes say): the host checks every request against it.
  if (call.path === "/auth.test") return { json: SLACK_AUTH_TEST };
  if (call.headers.authorization !== `Bearer ${BOT_TOKEN}`) return { json: { ok: false, error: "invalid_auth" } };
  if (call.path === "/chat.postMessage") {
    if (postLimited.delete(call.body.channel)) return { json: { ok: false, error: "rate_limited" } };
    const retryAfter = retryAfterHeader.get(call.body.channel);
    if (retryAfter !== undefined && retryAfterHeader.delete(call.body.channel)) {
      return { status: 429, headers: { "retry-after": typeof retryAfter === "string" ? retryAfter : retryAfter() }, json: { ok: false, error: "ratelimited" } };
    }
    return { json: { ok: true, channel: call.body.channel, ts: `${++ts}.000100` } };
  }
  if (call.path === "/chat.update") return { json: { ok: true, channel: call.body.channel, ts: call.body.ts } };
  return { status: 404, json: { ok: false, error: "unknown_method" } };
}

const chat = useChatHost({
  api: slackApi,
  runnerName: "slack-deliv",
  hostOptions: { captureLogs: false },
  async ready() {
    const credentials = { bot_token: BOT_TOKEN, signing_secret: SIGNING_SECRET };
    await chat.addBot({ platform: "slack", api_base_url: chat.fake.url, credentials }, { agentId: "slack-agent" });
  },
});

async function post(payload: unknown) {
  const body = JSON.stringify(payload);
  const res = await fetch(chat.webhookUrl, { method: "POST", headers: slackSignedHeaders(SIGNING_SECRET, body), body });
  await res.text();
  return res.status;
}
let seq = 0;
let messageTs = 1_800_000_000;
const message = (channel: string, text: string) => ({
  token: "t", team_id: "T1", api_app_id: "A1", type: "event_callback", event_id: `EvRF${++seq}`, event_time: Math.floor(Date.now() / 1000),
  event: { type: "message", channel, channel_type: "channel", user: "U42", text, ts: `${++messageTs}.000200`, team: "T1" },
});
const postsTo = (channel: string) => chat.fake.callsTo(/^\/chat\.postMessage$/).filter((c) => c.body.channel === channel);

describe("Slack: chat.postMessage's own rate-limit error", () => {
  it("answered HTTP 200 {ok:false, error:\"rate_limited\"} (nothing was posted), the reply is retried after a pause, not dropped", async () => {
    postLimited.add("C900");
    expect(await post(message("C900", "limited"))).toBe(200);
    const runId = await waitFor(() => chat.runner.contexts.find((c) => c.input.text === "limited")?.run_id);
    await chat.host.waitForRun(runId);
    const failed = await waitFor(async () => (await chat.host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE run_id = ? AND event_type = 'delivery.failed'", [runId]))[0]);
    // Slack documents rate_limited as "Application has posted too many messages": a rate limit, not a bad request.
    expect(JSON.parse(failed.data_json)).toMatchObject({ code: "rate_limited", will_retry: true });
    await waitFor(() => postsTo("C900").length >= 2, 10_000, "the retried post");
    expect(postsTo("C900").map((c) => c.body.text)).toEqual(["echo: limited", "echo: limited"]);
  });
});

/** The delivery.failed record of the reply to the message `text`. */
async function firstFailure(text: string): Promise<Record<string, unknown>> {
  const runId = await waitFor(() => chat.runner.contexts.find((c) => c.input.text === text)?.run_id);
  const failed = await waitFor(async () => (await chat.host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE run_id = ? AND event_type = 'delivery.failed'", [runId]))[0], 10_000, "the failure");
  return JSON.parse(failed.data_json);
}

describe("Slack: a 429 whose Retry-After is neither seconds nor an HTTP-date", () => {
  // Date.parse reads "-5" and "about 5" as a day in 2001: a wait of 0, the reply retried at once and recorded as asked to.
  it.each([
    ["C901", "-5"],
    ["C902", "about 5"],
  ])("names no wait: the reply backs off as for a platform that named none, recorded with retry_after_ms null (%s: %s)", async (channel, header) => {
    retryAfterHeader.set(channel, header);
    const text = `unreadable wait ${channel}`;
    expect(await post(message(channel, text))).toBe(200);
    const facts = await firstFailure(text);
    expect(facts).toMatchObject({ status: 429, code: "rate_limited", will_retry: true, retry_after_ms: null });
    expect(facts.retry_in_ms).toBeGreaterThan(0);
    await waitFor(() => postsTo(channel).length >= 2, 10_000, "the retried post");
  });

  it("an HTTP-date is read as one: the reply waits until then (IMF-fixdate, 3 s ahead as Slack answers)", async () => {
    retryAfterHeader.set("C903", () => new Date(Date.now() + 3_000).toUTCString());
    expect(await post(message("C903", "dated wait"))).toBe(200);
    const facts = await firstFailure("dated wait");
    // The date names whole seconds: up to a second less than asked, less the moment the answer took to arrive.
    expect(facts).toMatchObject({ status: 429, code: "rate_limited", will_retry: true, retry_after_ms: expect.any(Number) });
    expect(facts.retry_after_ms).toBeGreaterThan(1_000);
    expect(facts.retry_after_ms).toBeLessThanOrEqual(3_000);
  });
});
