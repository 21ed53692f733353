/**
 * Slack requests signed with the app's signing secret but not of the shape its Events API and interactivity
 * document: each is answered 200 (Slack retries anything else three times, then may disable the subscription) and
 * recorded with its payload for the operator, or refused with a clear 4xx when it cannot be read at all; never a
 * 500, never an unhandled error in the Worker's log.
 */
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { startChatRunner, startFakePlatform, waitFor } from "../support/fake-platform";
import { deliver, expectEachHandled, expectHandled, expectRecorded, INVALID_JSON, nestedJson, slackSignature, storedPayload, type MalformedRow } from "../support/malformed-webhooks";
import { SLACK_AUTH_TEST } from "../support/slack-events";

const BOT_TOKEN = "xoxb-malformed-slack-bot-token";
const SIGNING_SECRET = "malformed-slack-signing-secret-0123";
const SECRETS = [BOT_TOKEN, SIGNING_SECRET];

let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startChatRunner>>;
let bot: { botId: string; url: string };
let ts = 1_800_000_000;

beforeAll(async () => {
  fake = await startFakePlatform((call) => ({ json: call.path === "/auth.test" ? SLACK_AUTH_TEST : { ok: true, channel: call.body?.channel, ts: `${++ts}.000100` } }));
  runner = await startChatRunner("malformed-slack");
  host = await startTestHost({ captureLogs: true });
  const created = await host.admin("POST", "/v1/admin/bots", { platform: "slack", api_base_url: fake.url, credentials: { bot_token: BOT_TOKEN, signing_secret: SIGNING_SECRET } });
  expect(created.status).toBe(201);
  bot = { botId: created.body.bot_id, url: created.body.webhook_url };
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "malformed-slack-agent", scope: { type: "bot", id: bot.botId }, eventTypes: ["message.received", "message.recalled", "group.member_joined"] });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

const FORM = "application/x-www-form-urlencoded";
const post = (body: string | Buffer, headers: Record<string, string> = {}) => () =>
  fetch(bot.url, { method: "POST", headers: { "content-type": "application/json", ...slackSignature(SIGNING_SECRET, body), ...headers }, body });

let n = 0;
/** An event_callback envelope around `event` (for the bot user UBOT of app A1). */
const envelope = (event: unknown, fields: Record<string, unknown> = {}) =>
  JSON.stringify({ team_id: "T1", api_app_id: "A1", type: "event_callback", event_id: `EvMal${++n}`, event_time: 1_800_000_000, authorizations: [{ user_id: "UBOT", is_bot: true }], event, ...fields });
/** U42's "hello" in channel CMAL, but for the fields given. */
const message = (fields: Record<string, unknown>) => envelope({ type: "message", channel: "CMAL", channel_type: "channel", user: "U42", text: "hello", ts: `${++ts}.000200`, ...fields });
const form = (fields: Record<string, string>) => new URLSearchParams(fields).toString();
const interaction = (payload: Record<string, unknown>) => form({ payload: JSON.stringify({ trigger_id: `trig-mal-${++n}`, ...payload }) });

interface Row extends MalformedRow {
  form?: boolean;
  /** Recorded as platform.unhandled outside any conversation, under this source_event_type. */
  unusable?: string;
}

const rows: Row[] = [
  { name: "a JSON null", body: () => "null" },
  { name: "a JSON array", body: () => "[]" },
  { name: "event null", body: () => envelope(null) },
  { name: "event a string", body: () => envelope("x") },
  { name: "event.type a number", body: () => envelope({ type: 5 }) },
  { name: "event_id a number, event_time a string", body: () => envelope({ type: "reaction_added", item: "x" }, { event_id: 5, event_time: "x" }) },
  { name: "authorizations a string", body: () => message({}).replace('"authorizations":[{"user_id":"UBOT","is_bot":true}]', '"authorizations":"x"') },
  { name: "channel a number", body: () => message({ channel: 5 }) },
  { name: "ts a number", body: () => message({ ts: 5 }) },
  { name: "text null", body: () => message({ text: null }) },
  { name: "text with a lone surrogate, a NUL and an RTL override", body: () => message({ text: "<@UBOT> \ud800 \u0000 \u202e" }) },
  { name: "text of 600,000 characters", body: () => message({ text: "y".repeat(600_000) }) },
  { name: "files holding null", body: () => message({ files: [null] }) },
  { name: "files of the wrong shape, no text", body: () => message({ text: "", subtype: "file_share", files: [{ id: 5 }] }) },
  { name: "edited a string", body: () => message({ edited: "x" }) },
  { name: "message_changed with message null", body: () => message({ subtype: "message_changed", message: null, previous_message: null }) },
  { name: "message_deleted of wrong types", body: () => message({ subtype: "message_deleted", deleted_ts: 5, previous_message: "x" }) },
  { name: "member_joined_channel of wrong types", body: () => envelope({ type: "member_joined_channel", user: null, channel: 5 }) },
  { name: "url_verification with a numeric challenge", body: () => JSON.stringify({ type: "url_verification", challenge: 5 }) },
  { name: "a channel id with a lone surrogate", body: () => message({ channel: "C\ud800" }), unusable: "message.unusable_id" },
  { name: "a channel id with a NUL", body: () => message({ channel: "C\u0000X" }), unusable: "message.unusable_id" },
  { name: "an empty channel id", body: () => message({ channel: "" }), unusable: "message.unusable_id" },
  { name: "a channel id of 300 characters", body: () => message({ channel: "C".repeat(300) }), unusable: "message.unusable_id" },
  { name: "a thread_ts with a lone surrogate", body: () => message({ thread_ts: "1.\udc00" }), unusable: "message.unusable_id" },
  { name: "a joined member's channel with a lone surrogate", body: () => envelope({ type: "member_joined_channel", user: "U7", channel: "C\ud800" }), unusable: "member_joined_channel.unusable_id" },
  { name: "an event nested 50,000 levels deep", body: () => envelope({ type: "x", d: "@@" }).replace('"@@"', nestedJson(50_000)), refused: INVALID_JSON },
  { name: "a body cut short", body: () => message({}).slice(0, 30), refused: INVALID_JSON },
  { name: "a form payload null", body: () => form({ payload: "null" }), form: true },
  { name: "a form payload an array", body: () => form({ payload: "[1,2]" }), form: true },
  { name: "a form of no known kind", body: () => "%%%&&&==%zz", form: true },
  { name: "block_actions with no actions", body: () => interaction({ type: "block_actions", actions: [] }), form: true },
  { name: "block_actions of wrong types", body: () => interaction({ type: "block_actions", user: { id: "U42" }, channel: { id: "CMAL" }, container: { type: "message", channel_id: "CMAL", message_ts: "1.1", is_ephemeral: "yes" }, actions: [{ type: "button", value: 5, selected_options: [null] }], response_url: 5 }), form: true },
  { name: "block_actions in a channel with a lone surrogate", body: () => interaction({ type: "block_actions", user: { id: "U42" }, channel: { id: "C\ud800" }, container: { type: "message", channel_id: "C\ud800", message_ts: "1.1" }, actions: [{ type: "button", action_id: "a", value: "v" }] }), form: true, unusable: "block_actions.unusable_id" },
  { name: "message_action of wrong types", body: () => interaction({ type: "message_action", callback_id: 5, message: null, channel: null, user: "x" }), form: true },
  { name: "a slash command with only its command", body: () => form({ command: "/ask" }), form: true },
  { name: "a slash command in a channel with a NUL", body: () => form({ command: "/ask", text: "hi", channel_id: "C\u0000", user_id: "U42", trigger_id: `trig-mal-${++n}` }), form: true, unusable: "slash_command.unusable_id" },
  { name: "a form payload nested 50,000 levels deep", body: () => form({ payload: `{"type":"block_actions","x":${nestedJson(50_000)}}` }), form: true, refused: INVALID_JSON },
  { name: "a form payload that is not JSON", body: () => form({ payload: "{nope" }), form: true, refused: INVALID_JSON },
];

describe("Slack: a signed request of the wrong shape", () => {
  it("is acknowledged 200 and recorded with its payload, or refused 400 when it cannot be read; never a 500", async () => {
    await expectEachHandled(host, bot.botId, rows, {
      send: (body, row) => post(body, row.form ? { "content-type": FORM } : {}),
      secrets: SECRETS,
      stored: (body, row) => (row.form ? undefined : JSON.parse(body)),
      // An id no conversation can be keyed by comes from no real chat: recorded for the operator, and nothing runs.
      check: (row, { event_type, source_event_type, conversation_id }) => {
        if (row.unusable) expect({ row: row.name, event_type, source_event_type, conversation_id }).toEqual({ row: row.name, event_type: "platform.unhandled", source_event_type: row.unusable, conversation_id: null });
      },
    });
  });

  it("a message whose channel id cannot key a conversation starts no run, and its payload keeps the id as sent", async () => {
    const body = message({ channel: "C\ud800", text: "<@UBOT> answer me" });
    const runsBefore = runner.contexts.length;
    const d = await deliver(host, bot.botId, post(body));
    expectHandled(d, SECRETS);
    const recorded = await expectRecorded(host, d);
    expect(await storedPayload(host, recorded.event_id)).toMatchObject({ event: { channel: "C\ud800", text: "<@UBOT> answer me" } });
    const [row] = await host.query<{ run_id: string | null; disposition: string }>("SELECT run_id, disposition FROM event_log WHERE event_id = ?", [recorded.event_id]);
    expect(row).toEqual({ run_id: null, disposition: "unhandled" });
    // A message the runner would have answered, sent now, is answered: the host went on as before.
    const answered = await deliver(host, bot.botId, post(message({ text: "<@UBOT> and me?" })));
    expect(answered.status).toBe(200);
    await expect.poll(() => runner.contexts.length).toBe(runsBefore + 1);
    expect(runner.contexts.at(-1).input.text).toContain("and me?");
  });

  it("a message whose thread_ts is empty is in no thread: it runs, keyed and answered as its channel's", async () => {
    const d = await deliver(host, bot.botId, post(message({ thread_ts: "", text: "<@UBOT> thread_ts empty" })));
    expectHandled(d, SECRETS);
    const recorded = await expectRecorded(host, d);
    const [row] = await host.query<{ event_type: string; conversation_id: string | null; thread_id: string | null }>("SELECT event_type, conversation_id, thread_id FROM event_log WHERE event_id = ?", [recorded.event_id]);
    expect(row).toEqual({ event_type: "message.received", conversation_id: "CMAL", thread_id: null });
    await expect.poll(() => runner.contexts.find((c) => String(c.input.text).includes("thread_ts empty"))).toBeTruthy();
    const answer = await waitFor(() => fake.calls.find((c) => c.path === "/chat.postMessage" && String(c.body?.text).includes("thread_ts empty")), 10_000, "the answer");
    expect({ channel: answer.body.channel, thread_ts: answer.body.thread_ts }).toEqual({ channel: "CMAL", thread_ts: undefined });
  });

  it("a compressed body is refused 415 as such, and its bot's admin view blames no signing secret", async () => {
    const d = await deliver(host, bot.botId, post(gzipSync(message({ text: "compressed?" })), { "content-encoding": "gzip" }));
    expectHandled(d, SECRETS);
    expect(d.status).toBe(415);
    expect(JSON.parse(d.text).error.code).toBe("unsupported_media_type");
    expect(d.recorded).toEqual([]);
    const view = await host.admin("GET", `/v1/admin/bots/${bot.botId}`);
    expect(view.body.last_webhook_refusal ?? null).toBeNull();
  });
});
