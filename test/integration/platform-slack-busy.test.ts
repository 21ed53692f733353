import { createHmac } from "node:crypto";
import type { ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runOf, startSteererAndPlain } from "../support/conversation-runners";
import { startFakePlatform, waitFor, type FakeReply, type PlatformCall } from "../support/fake-platform";
import { putAgent } from "../support/scripted-runner";
import type { TestHost } from "../support/host";
import type { RunCall } from "../support/runner";

/**
 * A Slack channel busy with a run, and a message of it deleted or edited before it is answered (README "A busy
 * conversation"): a message no runner has yet is withdrawn, or answered as edited; one a runner has is left alone.
 */
const BOT_TOKEN = "xoxb-TEST-slack-busy-token-1234567890";
const SIGNING_SECRET = "slack-busy-signing-secret-0123456789";
let setup: Awaited<ReturnType<typeof startSteererAndPlain>>;
let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let botId: string;
let webhookUrl: string;
/** The texts each channel's runs started with, and what their steering pulls returned. */
const runsOf = new Map<string, string[]>();
const pulledOf = new Map<string, string[]>();

async function behave(call: RunCall, res: ServerResponse) {
  const { ctx, w, text, api } = runOf(call, res);
  const channel = ctx.conversation.conversation_id as string;
  runsOf.set(channel, [...(runsOf.get(channel) ?? []), text]);
  if (text.startsWith("hold")) await setup.gate(channel).promise;
  const items = ctx.config.pull === "all" ? ((await api("steering.pull")).body.data?.items ?? []) : [];
  pulledOf.set(channel, [...(pulledOf.get(channel) ?? []), ...items.map((i: any) => i.input.text)]);
  w.reply(`re: ${[text, ...items.map((i: any) => i.input.text)].join("+")}`);
}

let postTs = 1_700_000_000;
function slackApi(call: PlatformCall): FakeReply {
  if (call.headers.authorization !== `Bearer ${BOT_TOKEN}`) return { json: { ok: false, error: "invalid_auth" } };
  if (call.path === "/chat.postMessage") return { json: { ok: true, channel: call.body.channel, ts: `${++postTs}.000100` } };
  if (call.path === "/chat.update") return { json: { ok: true, channel: call.body.channel, ts: call.body.ts } };
  return { status: 404, json: { ok: false, error: "unknown_method" } };
}

beforeAll(async () => {
  fake = await startFakePlatform(slackApi);
  setup = await startSteererAndPlain(behave, (steering) => [{ name: "default", label: { en_US: "r" }, capabilities: { streaming: true, steering }, permissions: {} }]);
  host = setup.host;
  const created = await host.admin("POST", "/v1/admin/bots", { platform: "slack", workspace_id: "acme", api_base_url: fake.url, credentials: { bot_token: BOT_TOKEN, signing_secret: SIGNING_SECRET } });
  expect(created.status).toBe(201);
  botId = created.body.bot_id;
  webhookUrl = created.body.webhook_url;
});
afterAll(async () => {
  await setup?.dispose();
  await fake?.close();
});

let eventSeq = 0;
/** Slack delivering an event callback, signed; `eventId` again is Slack's retry of the same delivery. */
async function deliver(event: Record<string, unknown>, eventId = `EvBusy${++eventSeq}`) {
  const body = JSON.stringify({ token: "legacy", team_id: "T1", api_app_id: "A1", type: "event_callback", event_id: eventId, event_time: Math.floor(Date.now() / 1000), event });
  const timestamp = String(Math.floor(Date.now() / 1000));
  const signature = `v0=${createHmac("sha256", SIGNING_SECRET).update(`v0:${timestamp}:${body}`).digest("hex")}`;
  const res = await fetch(webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-slack-request-timestamp": timestamp, "x-slack-signature": signature }, body });
  expect(res.status).toBe(200);
  return eventId;
}
let messageTs = 1_800_000_000;
/** A person's message in `channel`; answers its ts. */
async function say(channel: string, text: string, type = "message"): Promise<string> {
  const ts = `${++messageTs}.000200`;
  await deliver({ type, channel, channel_type: "channel", user: "U42", text, ts, team: "T1" });
  return ts;
}
const deletion = (channel: string, ts: string) => ({ type: "message", subtype: "message_deleted", hidden: true, channel, ts: `${++messageTs}.000900`, deleted_ts: ts, previous_message: { type: "message", user: "U42", ts, text: "gone" } });
/** Slack's message_changed for a person's edit at `editedAt`. */
const edit = (channel: string, ts: string, text: string, editedAt: string) => ({
  type: "message",
  subtype: "message_changed",
  hidden: true,
  channel,
  ts: `${++messageTs}.000900`,
  message: { type: "message", user: "U42", text, ts, edited: { user: "U42", ts: editedAt } },
  previous_message: { type: "message", user: "U42", text: "before", ts },
});

const eventIdOf = (channel: string, ts: string) => `slack:${botId}:msg:${channel}:${ts}`;
const postsTo = (channel: string) => fake.callsTo(/^\/chat\.postMessage$/).filter((c) => c.body.channel === channel).map((c) => c.body.text as string);
async function steeringRecords(channel: string) {
  const rows = await host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE conversation_id = ? AND event_type LIKE 'steering.%' ORDER BY seq", [channel]);
  return rows.map((r) => ({ type: r.event_type, ...JSON.parse(r.data_json) }));
}
async function runOfEvent(eventId: string) {
  const [row] = await host.query<{ status: string; error_code: string | null; error_message: string | null }>("SELECT status, error_code, error_message FROM run WHERE event_id = ?", [eventId]);
  return row;
}
/** No run of the channel left to end, and its `answers` replies posted (a reply settles after its run ends), with a moment for any more. */
async function quiet(channel: string, answers: number) {
  await waitFor(async () => (await host.query<{ n: number }>("SELECT count(*) AS n FROM run WHERE conversation_id = ? AND status IN ('created','queued','running')", [channel]))[0].n === 0, 20_000, "quiet");
  await waitFor(() => postsTo(channel).length >= answers, 10_000, "the replies");
  await new Promise((r) => setTimeout(r, 300));
}
const agentFor = (channel: string, runner: "steerer" | "plain", strategy: string) =>
  putAgent(host, { agent_id: `slack-busy-${channel}`, name: channel, runner_id: setup[runner].runnerId(), runner_config: { pull: runner === "steerer" ? "all" : "never" }, scope: { type: "conversation", id: channel, bot_id: botId }, concurrency: { strategy } });

describe("Slack: a message deleted or edited before it is answered", () => {
  it("steer: a message deleted while claimed by the busy run is never pulled; its claim is recorded dropped, as recalled, once", async () => {
    const channel = "CBUSY1";
    await agentFor(channel, "steerer", "steer");
    await say(channel, "hold first");
    await waitFor(() => runsOf.get(channel)?.length === 1, 10_000, "the first run");
    const second = await say(channel, "second");
    await say(channel, "third");
    const recall = await deliver(deletion(channel, second));
    // Slack's retry of the same deletion changes nothing more.
    await deliver(deletion(channel, second), recall);
    setup.gate(channel).resolve();
    await quiet(channel, 1);
    expect(pulledOf.get(channel)).toEqual(["third"]);
    expect(postsTo(channel)).toEqual(["re: hold first+third"]);
    const records = await steeringRecords(channel);
    expect(records.filter((r) => r.source_event_id === eventIdOf(channel, second))).toEqual([expect.objectContaining({ type: "steering.dropped", reason: "recalled" })]);
    expect(records.filter((r) => r.type === "steering.injected").map((r) => r.source_event_id)).toHaveLength(1);
  }, 40_000);

  it("steer: a message deleted or edited while its claim is being recorded is withdrawn, or pulled as edited, all the same", async () => {
    const channel = "CBUSY5";
    await agentFor(channel, "steerer", "steer");
    await say(channel, "hold first");
    await waitFor(() => runsOf.get(channel)?.length === 1, 10_000, "the first run");
    // Each claim's write held back: the recall's and the edit's lookups read the messages as their own runs' still.
    host.databaseOutage({ delayMs: 1_500, matching: "absorbed_into_active_run", queries: 2 });
    let second = "";
    let third = "";
    const said = [say(channel, "second").then((ts) => (second = ts)), say(channel, "thrid").then((ts) => (third = ts))];
    const recorded = async (text: string) => (await host.query("SELECT 1 FROM event_log WHERE conversation_id = ? AND input_summary = ?", [channel, text])).length > 0;
    await waitFor(async () => (await recorded("second")) && (await recorded("thrid")), 5_000, "both recorded");
    await new Promise((r) => setTimeout(r, 200));
    const tsOf = async (text: string) => JSON.parse((await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE conversation_id = ? AND input_summary = ?", [channel, text]))[0].data_json).ts as string;
    await Promise.all([deliver(deletion(channel, await tsOf("second"))), deliver(edit(channel, await tsOf("thrid"), "third", "1800009999.000004"))]);
    await Promise.all(said);
    setup.gate(channel).resolve();
    await quiet(channel, 1);
    expect(pulledOf.get(channel)).toEqual(["third"]);
    expect(postsTo(channel)).toEqual(["re: hold first+third"]);
    const records = await steeringRecords(channel);
    expect(records.filter((r) => r.source_event_id === eventIdOf(channel, second))).toEqual([expect.objectContaining({ type: "steering.dropped", reason: "recalled" })]);
    expect(records.filter((r) => r.source_event_id === eventIdOf(channel, third)).map((r) => r.type)).toEqual(["steering.injected"]);
  }, 40_000);

  it("enqueue: a message deleted while its run waits its turn never runs (its run ends cancelled); one already running is answered", async () => {
    const channel = "CBUSY2";
    await agentFor(channel, "plain", "enqueue");
    const first = await say(channel, "hold first");
    await waitFor(() => runsOf.get(channel)?.length === 1, 10_000, "the first run");
    const second = await say(channel, "second");
    await say(channel, "third");
    await deliver(deletion(channel, second));
    // The running run's message deleted: its runner has it already, so it goes on.
    await deliver(deletion(channel, first));
    expect(await runOfEvent(eventIdOf(channel, second))).toEqual({ status: "cancelled", error_code: "cancelled", error_message: "its message was recalled before it was answered" });
    setup.gate(channel).resolve();
    await quiet(channel, 2);
    expect(runsOf.get(channel)).toEqual(["hold first", "third"]);
    expect(postsTo(channel)).toEqual(["re: hold first", "re: third"]);
    expect((await runOfEvent(eventIdOf(channel, first))).status).toBe("completed");
  }, 40_000);

  it("an edit of a message still waiting is answered as edited, queued or claimed; an older edit arriving late changes nothing", async () => {
    const queued = "CBUSY3";
    await agentFor(queued, "plain", "enqueue");
    await say(queued, "hold first");
    await waitFor(() => runsOf.get(queued)?.length === 1, 10_000, "the first run");
    const typo = await say(queued, "secnod");
    await deliver(edit(queued, typo, "second, fixed", "1800009999.000002"));
    await deliver(edit(queued, typo, "second, half fixed", "1800009999.000001"));
    setup.gate(queued).resolve();
    await quiet(queued, 2);
    expect(runsOf.get(queued)).toEqual(["hold first", "second, fixed"]);

    const claimed = "CBUSY4";
    await agentFor(claimed, "steerer", "steer");
    await say(claimed, "hold first");
    await waitFor(() => runsOf.get(claimed)?.length === 1, 10_000, "the first run");
    const mention = await say(claimed, "waht time", "app_mention");
    // Slack reports an edit of a message naming the bot twice: message_changed, and app_mention again marked edited.
    await deliver(edit(claimed, mention, "what time", "1800009999.000003"));
    await deliver({ type: "app_mention", channel: claimed, user: "U42", text: "what time", ts: mention, team: "T1", edited: { user: "U42", ts: "1800009999.000003" } });
    setup.gate(claimed).resolve();
    await quiet(claimed, 1);
    expect(pulledOf.get(claimed)).toEqual(["what time"]);
    expect(postsTo(claimed)).toEqual(["re: hold first+what time"]);
  }, 40_000);
});
