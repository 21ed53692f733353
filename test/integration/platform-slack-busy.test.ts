import { createHmac } from "node:crypto";
import type { ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runOf, startSteererAndPlain } from "../support/conversation-runners";
import { startFakePlatform, waitFor, type FakeReply, type PlatformCall } from "../support/fake-platform";
import { putAgent } from "../support/scripted-runner";
import type { TestHost } from "../support/host";
import type { RunCall } from "../support/runner";
import { slackDeletion, slackEdit } from "../support/slack-events";

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
/** What a `history` run read: its conversation's user items, and how many of its user items a search for "secret" found. */
const historyOf = new Map<string, { items: { content: string | null; files: number; recalled: boolean; edited: boolean }[]; found: number }>();
/** The files each channel's runs were given (artifact ids); what a `history` run read of its messages' records and those files. */
const filesOf = new Map<string, string[]>();
const recordsOf = new Map<string, { got: unknown[]; paged: unknown[]; files: unknown[] }>();
const FILE = Buffer.from("%PDF-1.4 the secret plan, drawn");

async function behave(call: RunCall, res: ServerResponse) {
  const { ctx, w, text, api } = runOf(call, res);
  const channel = ctx.conversation.conversation_id as string;
  runsOf.set(channel, [...(runsOf.get(channel) ?? []), text]);
  filesOf.set(channel, [...(filesOf.get(channel) ?? []), ...ctx.input.attachments.map((a: any) => a.artifact_id)]);
  if (text === "history") {
    const items = (await api("history.page", { limit: 50, direction: "forward" })).body.data.items.filter((i: any) => i.role === "user" && i.content !== "history");
    const found = (await api("history.search", { query: "secret", filters: { roles: ["user"] } })).body.data.items.length;
    historyOf.set(channel, { items: items.map((i: any) => ({ content: i.content ?? null, files: i.artifact_refs.length, recalled: Boolean(i.metadata.recalled), edited: Boolean(i.metadata.edited) })), found });
    // The same messages as their records read, and the files they brought.
    const said = (await api("event.page", { limit: 100 })).body.data.items.filter((e: any) => e.event_type === "message.received" && e.input_summary !== "history").reverse();
    const got = await Promise.all(said.map(async (e: any) => (await api("event.get", { event_id: e.event_id })).body.data));
    const files = await Promise.all((filesOf.get(channel) ?? []).flatMap((id) => ["artifact.read", "artifact.metadata"].map(async (action) => (await api(action, { artifact_id: id })).body)));
    const view = (e: any) => ({ input_summary: e.input_summary, metadata: e.metadata });
    recordsOf.set(channel, { got: got.map(view), paged: said.map(view), files });
    return void w.reply("read");
  }
  if (text.startsWith("hold")) await setup.gate(channel).promise;
  // "one": a single one-at-a-time pull, an empty answer taken for an empty queue (as a runner reads it); "two": one pull of at most two.
  const pulls: Record<string, () => ReturnType<typeof api>> = { all: () => api("steering.pull"), one: () => api("steering.pull", { mode: "one-at-a-time" }), two: () => api("steering.pull", { mode: "all", limit: 2 }) };
  const pull = pulls[ctx.config.pull]?.() ?? null;
  const items = pull ? ((await pull).body.data?.items ?? []) : [];
  pulledOf.set(channel, [...(pulledOf.get(channel) ?? []), ...items.map((i: any) => i.input.text)]);
  w.reply(`re: ${[text, ...items.map((i: any) => i.input.text)].join("+")}`);
}

let postTs = 1_700_000_000;
function slackApi(call: PlatformCall): FakeReply {
  if (call.headers.authorization !== `Bearer ${BOT_TOKEN}`) return { json: { ok: false, error: "invalid_auth" } };
  if (call.path === "/files/F1/plan.pdf") return { bytes: FILE, headers: { "content-type": "application/pdf" } };
  if (call.path === "/chat.postMessage") return { json: { ok: true, channel: call.body.channel, ts: `${++postTs}.000100` } };
  if (call.path === "/chat.update") return { json: { ok: true, channel: call.body.channel, ts: call.body.ts } };
  return { status: 404, json: { ok: false, error: "unknown_method" } };
}

beforeAll(async () => {
  fake = await startFakePlatform(slackApi);
  setup = await startSteererAndPlain(behave, (steering) => [{ name: "default", label: { en_US: "r" }, capabilities: { streaming: true, steering }, permissions: { history: ["page", "search"], events: ["get", "page"], artifacts: ["metadata", "read"] } }]);
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
async function deliver(event: Record<string, unknown>, eventId = `EvBusy${++eventSeq}`, status = 200) {
  await signedPost(JSON.stringify({ token: "legacy", team_id: "T1", api_app_id: "A1", type: "event_callback", event_id: eventId, event_time: Math.floor(Date.now() / 1000), event }), "application/json", status);
  return eventId;
}
/**
 * A deletion that never reaches the conversation: recorded (its marks written), then its look-up of the waiting
 * message fails and the webhook fails (Slack sends it again later). Answers the delivery's id, for that retry.
 */
function lostDeletion(channel: string, ts: string) {
  host.databaseOutage({ queries: 1, matching: "INDEXED BY run_status" });
  return deliver(deletion(channel, ts), undefined, 500);
}
/** An interactivity payload (a message shortcut), form-encoded and signed as Slack posts it. */
const interact = (payload: Record<string, unknown>) => signedPost(new URLSearchParams({ payload: JSON.stringify(payload) }).toString(), "application/x-www-form-urlencoded");
async function signedPost(body: string, contentType: string, status = 200) {
  const timestamp = String(Math.floor(Date.now() / 1000));
  const signature = `v0=${createHmac("sha256", SIGNING_SECRET).update(`v0:${timestamp}:${body}`).digest("hex")}`;
  const res = await fetch(webhookUrl, { method: "POST", headers: { "content-type": contentType, "x-slack-request-timestamp": timestamp, "x-slack-signature": signature }, body });
  expect(res.status).toBe(status);
}
let messageTs = 1_800_000_000;
/** A person's message in `channel`; answers its ts. */
async function say(channel: string, text: string, type = "message", extra: Record<string, unknown> = {}): Promise<string> {
  const ts = `${++messageTs}.000200`;
  await deliver({ type, channel, channel_type: "channel", user: "U42", text, ts, team: "T1", ...extra });
  return ts;
}
const deletion = (channel: string, ts: string) => slackDeletion(channel, ts, `${++messageTs}.000900`);
const edit = (channel: string, ts: string, text: string, editedAt: string) => slackEdit(channel, ts, text, editedAt, `${++messageTs}.000900`);

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
const agentFor = (channel: string, runner: "steerer" | "plain", strategy: string, concurrency: Record<string, unknown> = {}) =>
  putAgent(host, { agent_id: `slack-busy-${channel}`, name: channel, runner_id: setup[runner].runnerId(), runner_config: { pull: runner === "steerer" ? "all" : "never" }, scope: { type: "conversation", id: channel, bot_id: botId }, concurrency: { strategy, ...concurrency } });

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

  it("steer with debounce: the waiting run's own message deleted while it holds later ones of the burst: they are answered, in one reply; the deleted one never", async () => {
    const channel = "CBUSY7";
    await agentFor(channel, "steerer", "steer", { debounce_ms: 1500 });
    const first = await say(channel, "first");
    const second = await say(channel, "second");
    const third = await say(channel, "third");
    const recall = await deliver(deletion(channel, first));
    // Sent again: the run answers "second" now, and the recall changes nothing more.
    await deliver(deletion(channel, first), recall);
    await quiet(channel, 1);
    expect({ runs: runsOf.get(channel), pulled: pulledOf.get(channel) }).toEqual({ runs: ["second"], pulled: ["third"] });
    expect(postsTo(channel)).toEqual(["re: second+third"]);
    expect((await runOfEvent(eventIdOf(channel, first))).status).toBe("completed");
    const records = await steeringRecords(channel);
    expect(records.map((r) => [r.type, r.source_event_id])).toEqual([
      ["steering.injected", eventIdOf(channel, second)],
      ["steering.injected", eventIdOf(channel, third)],
    ]);
  }, 40_000);

  it("steer: of the messages a busy run ended without pulling, the one edited is answered in a turn of its own as edited; the deleted one stays unanswered", async () => {
    const channel = "CBUSY11";
    await putAgent(host, { agent_id: `slack-busy-${channel}`, name: channel, runner_id: setup.steerer.runnerId(), runner_config: { pull: "never" }, scope: { type: "conversation", id: channel, bot_id: botId }, concurrency: { strategy: "steer" } });
    await say(channel, "hold first");
    await waitFor(() => runsOf.get(channel)?.length === 1, 10_000, "the first run");
    const second = await say(channel, "second");
    const third = await say(channel, "thrid");
    await deliver(deletion(channel, second));
    await deliver(edit(channel, third, "third", "1800009999.000007"));
    setup.gate(channel).resolve();
    await quiet(channel, 2);
    expect(runsOf.get(channel)).toEqual(["hold first", "third"]);
    expect(postsTo(channel)).toEqual(["re: hold first", "re: third"]);
    const records = await steeringRecords(channel);
    expect(records.map((r) => [r.type, r.source_event_id, r.reason])).toEqual([
      ["steering.dropped", eventIdOf(channel, second), "recalled"],
      ["steering.dropped", eventIdOf(channel, third), undefined],
    ]);
  }, 40_000);

  it("steer: a message deleted or edited after the busy run dropped it, before it is decided anew, stays unanswered or is answered as edited", async () => {
    const channel = "CBUSY12";
    await putAgent(host, { agent_id: `slack-busy-${channel}`, name: channel, runner_id: setup.steerer.runnerId(), runner_config: { pull: "never" }, scope: { type: "conversation", id: channel, bot_id: botId }, concurrency: { strategy: "steer" } });
    await say(channel, "hold first");
    await waitFor(() => runsOf.get(channel)?.length === 1, 10_000, "the first run");
    const second = await say(channel, "second");
    const third = await say(channel, "thrid");
    // Taking the first claim back (its event bound to its own run again) is held in the database; the user deletes one and edits the other meanwhile.
    host.databaseOutage({ delayMs: 2_000, matching: "'$.steering')" });
    setup.gate(channel).resolve();
    await waitFor(async () => (await steeringRecords(channel)).length === 2, 10_000, "the drops recorded");
    await deliver(deletion(channel, second));
    await deliver(edit(channel, third, "third", "1800009999.000010"));
    await quiet(channel, 2);
    expect(runsOf.get(channel)).toEqual(["hold first", "third"]);
    expect(postsTo(channel)).toEqual(["re: hold first", "re: third"]);
  }, 40_000);

  it("steer: a message edited while claimed, dropped by the busy run and decided anew, keeps its newest words when an older edit arrives late", async () => {
    const channel = "CBUSY16";
    // Debounced: the run a dropped message is decided anew into waits a moment before it starts, as a new message's would.
    await putAgent(host, { agent_id: `slack-busy-${channel}`, name: channel, runner_id: setup.steerer.runnerId(), runner_config: { pull: "never" }, scope: { type: "conversation", id: channel, bot_id: botId }, concurrency: { strategy: "steer", debounce_ms: 1500 } });
    await say(channel, "hold first");
    await waitFor(() => runsOf.get(channel)?.length === 1, 10_000, "the first run");
    const typo = await say(channel, "secnod");
    await deliver(edit(channel, typo, "second, fixed", "1800009999.000014"));
    setup.gate(channel).resolve();
    // Decided anew into a run of its own (waiting out its debounce): then Slack's late delivery of an older edit comes.
    await waitFor(async () => (await host.query<{ disposition: string }>("SELECT disposition FROM event_log WHERE event_id = ?", [eventIdOf(channel, typo)]))[0]?.disposition === "bound", 10_000, "decided anew");
    await deliver(edit(channel, typo, "second, half fixed", "1800009999.000013"));
    await quiet(channel, 2);
    expect(runsOf.get(channel)).toEqual(["hold first", "second, fixed"]);
  }, 40_000);

  it("a deletion that never reached the conversation (its lookup failed: Slack sends it again later) still withdraws the message its run would start with: cancelled, or a message it claimed answered instead", async () => {
    // Enqueue: the deleted message's run waits its turn behind a busy one, which ends before Slack's retry comes.
    const queued = "CBUSY17";
    await agentFor(queued, "plain", "enqueue");
    await say(queued, "hold first");
    await waitFor(() => runsOf.get(queued)?.length === 1, 10_000, "the first run");
    const second = await say(queued, "second");
    const recall = await lostDeletion(queued, second);
    setup.gate(queued).resolve();
    await quiet(queued, 1);
    await deliver(deletion(queued, second), recall);
    expect(runsOf.get(queued)).toEqual(["hold first"]);
    expect(await runOfEvent(eventIdOf(queued, second))).toEqual({ status: "cancelled", error_code: "cancelled", error_message: "its message was recalled before it was answered" });
    expect(postsTo(queued)).toEqual(["re: hold first"]);

    // Steer with debounce: the waiting run's own message deleted while it holds later ones; its debounce ends first.
    const burst = "CBUSY18";
    await agentFor(burst, "steerer", "steer", { debounce_ms: 1500 });
    const first = await say(burst, "first");
    await say(burst, "second");
    await say(burst, "third");
    await lostDeletion(burst, first);
    await quiet(burst, 1);
    expect({ runs: runsOf.get(burst), pulled: pulledOf.get(burst) }).toEqual({ runs: ["second"], pulled: ["third"] });
    expect(postsTo(burst)).toEqual(["re: second+third"]);
  }, 40_000);

  it("steer: a claimed message whose deletion never reached the conversation (its lookup failed: Slack sends it again later) is not pulled by the busy run: recorded dropped, as recalled", async () => {
    const channel = "CBUSY21";
    await agentFor(channel, "steerer", "steer");
    await say(channel, "hold first");
    await waitFor(() => runsOf.get(channel)?.length === 1, 10_000, "the first run");
    const second = await say(channel, "second");
    await say(channel, "third");
    const recall = await lostDeletion(channel, second);
    // The run pulls before Slack's retry comes.
    setup.gate(channel).resolve();
    await quiet(channel, 1);
    await deliver(deletion(channel, second), recall);
    expect(pulledOf.get(channel)).toEqual(["third"]);
    expect(postsTo(channel)).toEqual(["re: hold first+third"]);
    const records = await steeringRecords(channel);
    expect(records.map((r) => [r.type, r.source_event_id, r.reason])).toEqual([
      ["steering.dropped", eventIdOf(channel, second), "recalled"],
      ["steering.injected", expect.stringMatching(/^slack:/), undefined],
    ]);
  }, 40_000);

  it.each([
    { pull: "one", said: ["third"] },
    { pull: "two", said: ["third", "fourth"] },
  ])("steer: a pull ($pull) whose item is found recalled (its deletion never reached the conversation) answers as many of the next queued items as it asked for, not fewer", async ({ pull, said }) => {
    const channel = `CBUSY22-${pull}`;
    await putAgent(host, { agent_id: `slack-busy-${channel}`, name: channel, runner_id: setup.steerer.runnerId(), runner_config: { pull }, scope: { type: "conversation", id: channel, bot_id: botId }, concurrency: { strategy: "steer" } });
    await say(channel, "hold first");
    await waitFor(() => runsOf.get(channel)?.length === 1, 10_000, "the first run");
    const second = await say(channel, "second");
    for (const text of said) await say(channel, text);
    const recall = await lostDeletion(channel, second);
    setup.gate(channel).resolve();
    await quiet(channel, 1);
    await deliver(deletion(channel, second), recall);
    expect(pulledOf.get(channel)).toEqual(said);
    expect(postsTo(channel)).toEqual([`re: ${["hold first", ...said].join("+")}`]);
    expect((await steeringRecords(channel)).map((r) => [r.type, r.reason])).toEqual([
      ["steering.dropped", "recalled"],
      ...said.map(() => ["steering.injected", undefined]),
    ]);
  }, 40_000);

  it("steer: a claimed message whose deletion never reached the conversation, left unpulled as the busy run ends: recorded dropped, as recalled, and not answered; the next one is", async () => {
    const channel = "CBUSY23";
    await putAgent(host, { agent_id: `slack-busy-${channel}`, name: channel, runner_id: setup.steerer.runnerId(), runner_config: { pull: "never" }, scope: { type: "conversation", id: channel, bot_id: botId }, concurrency: { strategy: "steer" } });
    await say(channel, "hold first");
    await waitFor(() => runsOf.get(channel)?.length === 1, 10_000, "the first run");
    const second = await say(channel, "second");
    const third = await say(channel, "third");
    const recall = await lostDeletion(channel, second);
    // The run ends without pulling before Slack's retry comes.
    setup.gate(channel).resolve();
    await waitFor(() => postsTo(channel).length === 2, 20_000, "both replies");
    await quiet(channel, 2);
    await deliver(deletion(channel, second), recall);
    expect(runsOf.get(channel)).toEqual(["hold first", "third"]);
    expect(postsTo(channel)).toEqual(["re: hold first", "re: third"]);
    expect((await steeringRecords(channel)).map((r) => [r.type, r.source_event_id, r.reason])).toEqual([
      ["steering.dropped", eventIdOf(channel, second), "recalled"],
      ["steering.dropped", eventIdOf(channel, third), undefined],
    ]);
  }, 40_000);

  it("steer with debounce: the waiting run's own message and the first it claimed both deleted, neither deletion reaching the conversation: the next claimed one is answered, the deleted claim recorded dropped, as recalled, not injected", async () => {
    const channel = "CBUSY-R7";
    await agentFor(channel, "steerer", "steer", { debounce_ms: 3000 });
    const first = await say(channel, "first");
    const second = await say(channel, "second");
    await say(channel, "third");
    // Each deletion is recorded (its marks written), then its look-up of the waiting message fails: its webhook fails.
    for (const ts of [first, second]) {
      await lostDeletion(channel, ts);
    }
    await quiet(channel, 1);
    expect({ runs: runsOf.get(channel), pulled: pulledOf.get(channel) ?? [] }).toEqual({ runs: ["third"], pulled: [] });
    expect(postsTo(channel)).toEqual(["re: third"]);
    expect((await steeringRecords(channel)).map((r) => [r.type, r.source_event_id, r.reason])).toEqual([
      ["steering.dropped", eventIdOf(channel, second), "recalled"],
      ["steering.injected", expect.stringMatching(/^slack:/), undefined],
    ]);
  }, 40_000);

  it("a deletion a run's start finds, its cancel's write refused once: the run is started again after a pause and ends cancelled, with no failure notice", async () => {
    const channel = "CBUSY20";
    await agentFor(channel, "plain", "enqueue");
    await say(channel, "hold first");
    await waitFor(() => runsOf.get(channel)?.length === 1, 10_000, "the first run");
    const second = await say(channel, "second");
    await lostDeletion(channel, second);
    // The start's cancel (its error message among the write's arguments) is refused the first time.
    host.databaseOutage({ queries: 1, matching: "its message was recalled before it was answered" });
    setup.gate(channel).resolve();
    await quiet(channel, 1);
    expect(runsOf.get(channel)).toEqual(["hold first"]);
    expect(await runOfEvent(eventIdOf(channel, second))).toEqual({ status: "cancelled", error_code: "cancelled", error_message: "its message was recalled before it was answered" });
    expect(postsTo(channel)).toEqual(["re: hold first"]);
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

  it("an edit made while its run is being claimed (the database slow), its runner not called yet, is what its runner gets", async () => {
    // Claimed as the idle channel's message is decided, or by the scheduler once its debounce is over.
    for (const [channel, debounce] of [["CBUSY8", 0], ["CBUSY9", 300]] as const) {
      await agentFor(channel, "plain", "enqueue", debounce ? { debounce_ms: debounce } : {});
      // The claim (the one query that sets started_at), held back.
      host.databaseOutage({ delayMs: 1_500, matching: "started_at" });
      const typo = await say(channel, "secnod");
      await new Promise((r) => setTimeout(r, debounce * 2));
      await deliver(edit(channel, typo, "second", "1800009999.000007"));
      await quiet(channel, 1);
      expect(runsOf.get(channel)).toEqual(["second"]);
      expect(postsTo(channel)).toEqual(["re: second"]);
    }
  }, 40_000);

  it("an edit made while its message's hand-over to its conversation is on its way (the database's answer slow) is what its runner gets", async () => {
    const channel = "CBUSY10";
    await agentFor(channel, "plain", "enqueue");
    // The batch that records the message and its run (the one that reads latest_transcript_seq) applied, its answer held back.
    host.databaseOutage({ answerDelayMs: 1_500, matching: "latest_transcript_seq" });
    const said = say(channel, "secnod");
    const [row] = await waitFor(async () => {
      const rows = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE conversation_id = ? AND input_summary = 'secnod'", [channel]);
      return rows.length > 0 && rows;
    }, 5_000, "the message recorded");
    await deliver(edit(channel, JSON.parse(row.data_json).ts, "second", "1800009999.000008"));
    await said;
    await quiet(channel, 1);
    expect(runsOf.get(channel)).toEqual(["second"]);
    expect(postsTo(channel)).toEqual(["re: second"]);
  }, 40_000);

  it("an older edit arriving after a newer one reached the message during its hand-over changes nothing: its run starts with the newer words", async () => {
    const channel = "CBUSY19";
    await agentFor(channel, "plain", "enqueue");
    await say(channel, "hold first");
    await waitFor(() => runsOf.get(channel)?.length === 1, 10_000, "the first run");
    // The hand-over's answer held back: the newer edit is kept for it; the run then waits its turn, and the older edit comes.
    host.databaseOutage({ answerDelayMs: 1_500, matching: "latest_transcript_seq" });
    const said = say(channel, "secnod");
    const [row] = await waitFor(async () => {
      const rows = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE conversation_id = ? AND input_summary = 'secnod'", [channel]);
      return rows.length > 0 && rows;
    }, 5_000, "the message recorded");
    const ts = JSON.parse(row.data_json).ts as string;
    await deliver(edit(channel, ts, "second, fixed", "1800009999.000016"));
    await said;
    await deliver(edit(channel, ts, "second, half fixed", "1800009999.000015"));
    setup.gate(channel).resolve();
    await quiet(channel, 2);
    expect(runsOf.get(channel)).toEqual(["hold first", "second, fixed"]);
  }, 40_000);

  it("steer: an edit made during its message's hand-over reaches the runner also when that hand-over's claim is refused and Slack sends the message again", async () => {
    const channel = "CBUSY14";
    await agentFor(channel, "steerer", "steer");
    await say(channel, "hold first");
    await waitFor(() => runsOf.get(channel)?.length === 1, 10_000, "the first run");
    // The message and its run recorded, the answer slow: the edit is held for the hand-over, whose claim is then refused.
    host.databaseOutage({ answerDelayMs: 1_500, matching: "latest_transcript_seq" });
    host.databaseOutage({ queries: 1, matching: "absorbed_into_active_run" });
    const ts = `${++messageTs}.000200`;
    const message = { type: "message", channel, channel_type: "channel", user: "U42", text: "secnod", ts, team: "T1" };
    const refused = deliver(message, "EvBusyHandOverRefused", 500);
    await waitFor(async () => (await host.query("SELECT 1 FROM event_log WHERE conversation_id = ? AND input_summary = 'secnod'", [channel])).length > 0, 5_000, "the message recorded");
    await deliver(edit(channel, ts, "second", "1800009999.000011"));
    await refused;
    // Slack's retry of the message hands it over again: claimed, with its newest words.
    await deliver(message, "EvBusyHandOverRefused");
    setup.gate(channel).resolve();
    await quiet(channel, 1);
    expect(pulledOf.get(channel)).toEqual(["second"]);
    expect(postsTo(channel)).toEqual(["re: hold first+second"]);
  }, 40_000);

  it("a message deleted or edited after it was answered: later runs read it recalled (nothing of it left in its transcript item or its record, found by no search, its files gone) or as edited; EventLog keeps it as said for operators", async () => {
    const channel = "CBUSY6";
    await agentFor(channel, "plain", "enqueue");
    const file = { id: "F1", name: "plan.pdf", mimetype: "application/pdf", url_private_download: `${fake.url}/files/F1/plan.pdf` };
    const secret = await say(channel, "the secret plan", "message", { subtype: "file_share", files: [file] });
    await quiet(channel, 1);
    const [fileId] = filesOf.get(channel)!;
    expect(await host.r2Object(`artifacts/${fileId}`)).toEqual(new Uint8Array(FILE));
    const typo = await say(channel, "teh secret typo");
    await quiet(channel, 2);
    const recall = await deliver(deletion(channel, secret));
    await deliver(edit(channel, typo, "the typo fixed", "1800009999.000006"));
    // Sent again, and an older edit arriving late: nothing more changes.
    await deliver(deletion(channel, secret), recall);
    await deliver(edit(channel, typo, "the typo half fixed", "1800009999.000005"));
    await say(channel, "history");
    await quiet(channel, 3);
    expect(historyOf.get(channel)).toEqual({
      items: [
        { content: null, files: 0, recalled: true, edited: false },
        { content: "the typo fixed", files: 0, recalled: false, edited: true },
      ],
      found: 0,
    });
    const [item] = await host.query<{ metadata_json: string }>("SELECT metadata_json FROM transcript WHERE event_id = ?", [eventIdOf(channel, secret)]);
    expect(JSON.parse(item.metadata_json).recalled).toMatchObject({ event_id: `slack:${botId}:${recall}` });
    // Their records as runs read them (event.get, event.page) as history shows them: the recalled one holds none of
    // its words (nor its files' names), the edited one its newest; the recalled one's file is refused, as if expired.
    const recalled = { recalled: { event_id: `slack:${botId}:${recall}`, recalled_at: expect.any(String) } };
    const records = [
      { input_summary: null, metadata: recalled },
      { input_summary: "the typo fixed", metadata: { edited: { event_id: expect.stringMatching(/^slack:/), version: 1800009999.000006, edited_at: expect.any(String) } } },
    ];
    const refused = { ok: false, error: expect.objectContaining({ code: "not_found" }) };
    expect(recordsOf.get(channel)).toEqual({ got: records, paged: records, files: [refused, refused] });
    // Its bytes deleted at once, not left for their expiry.
    expect(await host.r2Object(`artifacts/${fileId}`)).toBeNull();
    // EventLog keeps both as said, and an operator reads them so, the recall marked.
    const said = await host.query<{ summary: string }>("SELECT input_summary AS summary FROM event_log WHERE event_id IN (?, ?) ORDER BY seq", [eventIdOf(channel, secret), eventIdOf(channel, typo)]);
    expect(said.map((r) => r.summary)).toEqual(["the secret plan", "teh secret typo"]);
    const shown = await host.admin("GET", `/v1/events/${encodeURIComponent(eventIdOf(channel, secret))}`);
    expect(shown.body).toMatchObject({ input_summary: "the secret plan", input: { text: "the secret plan" }, metadata: recalled });
  }, 40_000);

  it("a message shortcut's copy of a message deleted afterwards reads recalled too: later runs find nothing of its words or files", async () => {
    const channel = "CBUSY13";
    await agentFor(channel, "plain", "enqueue");
    const file = { id: "F1", name: "plan.pdf", mimetype: "application/pdf", url_private_download: `${fake.url}/files/F1/plan.pdf` };
    const secret = await say(channel, "the secret plan", "message", { subtype: "file_share", files: [file] });
    await quiet(channel, 1);
    // Another user's shortcut ("Summarize") on it: its input is that message, its words and its file fetched anew.
    const message = { type: "message", subtype: "file_share", user: "U42", ts: secret, text: "the secret plan", files: [file] };
    await interact({ type: "message_action", team: { id: "T1" }, user: { id: "U7", username: "bo", team_id: "T1" }, channel: { id: channel }, callback_id: "summarize", trigger_id: "busy.sc.1", message_ts: secret, message });
    await quiet(channel, 2);
    expect(runsOf.get(channel)).toEqual(["the secret plan", "the secret plan"]);
    expect(filesOf.get(channel)).toHaveLength(2);
    // Edited, the copy reads the newest words too; then deleted.
    await deliver(edit(channel, secret, "the plan, reworded", "1800009999.000009"));
    const items = await host.query<{ content: string }>("SELECT content FROM transcript WHERE conversation_id = ? AND role = 'user' ORDER BY seq", [channel]);
    expect(items.map((i) => i.content)).toEqual(["the plan, reworded", "the plan, reworded"]);
    const recall = await deliver(deletion(channel, secret));
    await say(channel, "history");
    await quiet(channel, 3);
    const gone = { content: null, files: 0, recalled: true, edited: true };
    expect(historyOf.get(channel)).toEqual({ items: [gone, gone], found: 0 });
    const record = { input_summary: null, metadata: { recalled: { event_id: `slack:${botId}:${recall}`, recalled_at: expect.any(String) } } };
    const refused = { ok: false, error: expect.objectContaining({ code: "not_found" }) };
    expect(recordsOf.get(channel)).toEqual({ got: [record, record], paged: [record, record], files: [refused, refused, refused, refused] });
    for (const id of filesOf.get(channel)!) expect(await host.r2Object(`artifacts/${id}`)).toBeNull();
  }, 40_000);

  it("a message said while the bot was paused (recorded with its words, never run) and then deleted: runs after the pause read nothing of it in its record", async () => {
    const channel = "CBUSY7";
    await agentFor(channel, "plain", "enqueue");
    const pause = (enabled: boolean) => host.admin("PUT", `/v1/admin/bots/${botId}`, { api_base_url: fake.url, enabled });
    expect((await pause(false)).status).toBe(200);
    const file = { id: "F1", name: "paused-plan.pdf", mimetype: "application/pdf", url_private_download: `${fake.url}/files/F1/plan.pdf` };
    const secret = await say(channel, "the paused secret", "message", { subtype: "file_share", files: [file] });
    expect((await pause(true)).status).toBe(200);
    const recall = await deliver(deletion(channel, secret));
    await say(channel, "history");
    await quiet(channel, 1);
    // Not even the name of the file it would have brought.
    const records = [{ input_summary: null, metadata: { recalled: { event_id: `slack:${botId}:${recall}`, recalled_at: expect.any(String) } } }];
    expect(recordsOf.get(channel)).toEqual({ got: records, paged: records, files: [] });
    const shown = await host.admin("GET", `/v1/events/${encodeURIComponent(eventIdOf(channel, secret))}`);
    expect(shown.body).toMatchObject({ disposition: "bot_disabled", input_summary: "the paused secret", metadata: { attachments_unavailable: expect.stringContaining("paused-plan.pdf") } });
  }, 40_000);
});
