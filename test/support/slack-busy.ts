import { createHmac } from "node:crypto";
import type { ServerResponse } from "node:http";
import { afterAll, beforeAll, expect } from "vitest";
import { runOf, startSteererAndPlain } from "./conversation-runners";
import { startFakePlatform, waitFor, type FakeReply, type PlatformCall } from "./fake-platform";
import { putAgent } from "./scripted-runner";
import type { TestHost } from "./host";
import type { RunCall } from "./runner";
import { SLACK_AUTH_TEST, slackDeletion, slackEdit } from "./slack-events";

/**
 * The set-up the platform-slack-busy*.test.ts files share: a Slack bot on a fake Web API, a steering runner and a
 * plain one that record what each channel's runs started with, pulled, and read of their history. Call it once at a
 * file's top level: it registers the file's beforeAll and afterAll, and each call has its own state.
 */
export function useBusySlack() {
  /** Values tests change as well as read: the last message ts handed out. */
  const state = { messageTs: 1_800_000_000 };
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
    if (call.path === "/auth.test") return { json: SLACK_AUTH_TEST };
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
  /** A person's message in `channel`; answers its ts. */
  async function say(channel: string, text: string, type = "message", extra: Record<string, unknown> = {}): Promise<string> {
    const ts = `${++state.messageTs}.000200`;
    await deliver({ type, channel, channel_type: "channel", user: "U42", text, ts, team: "T1", ...extra });
    return ts;
  }
  /** Says "hold first" in `channel` and waits for its run to start: busy until the channel's gate opens. Answers its ts. */
  async function sayHeldFirst(channel: string): Promise<string> {
    const ts = await say(channel, "hold first");
    await waitFor(() => runsOf.get(channel)?.length === 1, 10_000, "the first run");
    return ts;
  }
  /** The ts of `channel`'s message that says `text`, once it is recorded (its hand-over may still be on its way). */
  async function tsOnceRecorded(channel: string, text: string): Promise<string> {
    const [row] = await waitFor(async () => {
      const rows = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE conversation_id = ? AND input_summary = ?", [channel, text]);
      return rows.length > 0 && rows;
    }, 5_000, `${text} recorded`);
    return JSON.parse(row.data_json).ts;
  }
  const deletion = (channel: string, ts: string) => slackDeletion(channel, ts, `${++state.messageTs}.000900`);
  const edit = (channel: string, ts: string, text: string, editedAt: string) => slackEdit(channel, ts, text, editedAt, `${++state.messageTs}.000900`);

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
  /** `channel`'s agent: on `runner`, with `strategy`; its runs pull (runner_config.pull) all they can on the steerer, never on the plain one, unless told. */
  const agentFor = (channel: string, runner: "steerer" | "plain", strategy: string, concurrency: Record<string, unknown> = {}, pull = runner === "steerer" ? "all" : "never") =>
    putAgent(host, { agent_id: `slack-busy-${channel}`, name: channel, runner_id: setup[runner].runnerId(), runner_config: { pull }, scope: { type: "conversation", id: channel, bot_id: botId }, concurrency: { strategy, ...concurrency } });

  return {
    get setup() {
      return setup;
    },
    get host() {
      return host;
    },
    get fake() {
      return fake;
    },
    get botId() {
      return botId;
    },
    get webhookUrl() {
      return webhookUrl;
    },
    state, BOT_TOKEN, SIGNING_SECRET, FILE, runsOf, pulledOf, historyOf, filesOf, recordsOf,
    deliver, lostDeletion, interact, signedPost, say, sayHeldFirst, tsOnceRecorded, deletion, edit, eventIdOf, postsTo, steeringRecords, runOfEvent, quiet, agentFor,
  };
}
export type BusySlack = ReturnType<typeof useBusySlack>;
