import { createHmac } from "node:crypto";
import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LocalHost } from "../../local/host";
import { adminCall } from "../../local/setup";
import { runOf } from "../support/conversation-runners";
import { startFakePlatform, waitFor, type FakeReply, type PlatformCall } from "../support/fake-platform";
import { startHostOn, waitForRunOn } from "../support/host";
import { keyedGates } from "../support/host-api";
import { startAdHocRunner } from "../support/runner";
import { SLACK_AUTH_TEST, slackDeletion, slackEdit } from "../support/slack-events";
import { useDataDir } from "../support/restart-host";

/**
 * A Slack message deleted while its run waits (its debounce window) holding later messages it claimed: the recall
 * writes its marks in libSQL, then the conversation's object swaps the first claimed message in (its
 * `steering.injected` written first). The instance dies between the two: the next one must not start the run with the
 * deleted message's words before Slack sends the deletion again (README "A message recalled or edited"). Likewise an
 * edit's version, carried only by a claim the dying instance was writing, must survive it: an older edit arriving late
 * changes nothing.
 */
const BOT_TOKEN = "xoxb-TEST-restart-recall-token-123456";
const SIGNING_SECRET = "restart-recall-signing-secret-0123456";
const dataDir = useDataDir("agent-host-restart-recall-");
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
/** By channel: the texts runs started with, and what their pulls returned. */
const startedIn = new Map<string, string[]>();
const pulledIn = new Map<string, string[]>();
const noted = (m: Map<string, string[]>, channel: string, ...texts: string[]) => m.set(channel, [...(m.get(channel) ?? []), ...texts]);
/** Runs whose text starts "hold" wait for their gate; one whose text ends "end" then ends without pulling. */
const gates = keyedGates();

/** One port for both instances: a run's job keeps the host's URL its event came in on, for its runner's Host API calls. */
let port = 0;
const start = () => startHostOn(dataDir.path, { DB_QUERY_TIMEOUT_MS: "30000" }, { port });

function slackApi(call: PlatformCall): FakeReply {
  // Who the bot token is (its workspace T1, as the envelopes say): the host checks every request against it.
  if (call.path === "/auth.test") return { json: SLACK_AUTH_TEST };
  if (call.path === "/chat.postMessage") return { json: { ok: true, channel: call.body.channel, ts: `${Date.now() / 1000}` } };
  if (call.path === "/chat.update") return { json: { ok: true, channel: call.body.channel, ts: call.body.ts } };
  return { status: 404, json: { ok: false, error: "unknown_method" } };
}

beforeAll(async () => {
  const probe = createServer().listen(0, "127.0.0.1");
  await once(probe, "listening");
  port = (probe.address() as AddressInfo).port;
  await new Promise((r) => probe.close(r));
  fake = await startFakePlatform(slackApi);
  runner = await startAdHocRunner({
    name: "steerer",
    runners: [{ name: "default", label: { en_US: "steerer" }, capabilities: { streaming: true, steering: true }, permissions: {} }],
    async onRun(call, res) {
      const { w, text, api, conversation } = runOf(call, res);
      noted(startedIn, conversation, text);
      if (text.startsWith("hold")) await gates.gate(text).promise;
      const items = text.endsWith("end") ? [] : ((await api("steering.pull")).body.data?.items ?? []).map((i: any) => i.input.text as string);
      noted(pulledIn, conversation, ...items);
      w.reply(`re: ${[text, ...items].join("+")}`);
    },
  });
});
afterAll(async () => {
  gates.releaseAll();
  await runner?.close();
  await fake?.close();
});

/** The runner service and the Slack bot, registered once (the database outlives each host). */
let botOnce: Promise<string> | undefined;
function registered(host: LocalHost): Promise<string> {
  botOnce ??= (async () => {
    expect((await adminCall(host, "POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
    const bot = await adminCall<{ bot_id: string }>(host, "POST", "/v1/admin/bots", { platform: "slack", workspace_id: "acme", api_base_url: fake.url, credentials: { bot_token: BOT_TOKEN, signing_secret: SIGNING_SECRET } });
    return bot.body.bot_id;
  })();
  return botOnce;
}

let eventSeq = 0;
async function deliver(host: LocalHost, botId: string, event: Record<string, unknown>, eventId = `EvRecall${++eventSeq}`) {
  const body = JSON.stringify({ token: "legacy", team_id: "T1", api_app_id: "A1", type: "event_callback", event_id: eventId, event_time: Math.floor(Date.now() / 1000), event });
  const timestamp = String(Math.floor(Date.now() / 1000));
  const signature = `v0=${createHmac("sha256", SIGNING_SECRET).update(`v0:${timestamp}:${body}`).digest("hex")}`;
  return fetch(`${host.url}/v1/webhooks/slack/${botId}`, { method: "POST", headers: { "content-type": "application/json", "x-slack-request-timestamp": timestamp, "x-slack-signature": signature }, body });
}
let messageTs = 1_800_000_000;
const message = (channel: string, text: string) => ({ type: "message", channel, channel_type: "channel", user: "U42", text, ts: `${++messageTs}.000200`, team: "T1" });
const edit = (channel: string, ts: string, text: string, editedAt: string) => slackEdit(channel, ts, text, editedAt, `${++messageTs}.000900`);
const deletion = (channel: string, ts: string) => slackDeletion(channel, ts, `${++messageTs}.000900`);

describe("a recall whose work in the conversation's object a restart cut short", () => {
  it("a claimed message swapped in for the deleted one, its injected record written as the instance died: the deleted message is never answered; the claimed one is, once", async () => {
    let host = await start();
    const channel = "CRECALL1";
    try {
      const botId = await registered(host);
      const agent = { agent_id: "agent-recall", name: channel, runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: channel, bot_id: botId }, concurrency: { strategy: "steer", debounce_ms: 3000 } };
      expect((await adminCall(host, "POST", "/v1/admin/agents", agent)).status).toBe(201);
      const first = message(channel, "first");
      const second = message(channel, "second");
      for (const m of [first, second]) expect((await deliver(host, botId, m)).status).toBe(200);
      const secondId = `slack:${botId}:msg:${channel}:${second.ts}`;
      const injected = () => host.query("SELECT 1 FROM event_log WHERE event_type = 'steering.injected' AND data_json LIKE ?", [`%"source_event_id":"${secondId}"%`]);
      // The swap's injected record applies; its answer is held back, and the instance dies meanwhile.
      host.databaseOutage({ answerDelayMs: 5_000, matching: "steering.injected" });
      const recall = deletion(channel, first.ts);
      const recalling = deliver(host, botId, recall, "EvRecallCutShort").catch(() => undefined);
      await waitFor(async () => (await injected()).length > 0, 5_000, "the swap's injected record");
      await host.dispose();
      await recalling;
      host = await start();
      // The next instance's alarm (the debounce's) comes before Slack sends the deletion again.
      const [own] = await host.query<{ run_id: string }>("SELECT run_id FROM run WHERE event_id = ?", [`slack:${botId}:msg:${channel}:${first.ts}`]);
      await waitForRunOn(host, own.run_id, 15_000);
      // The claimed message never reached a runner there (its injected record's answer was lost): dropped, and answered in a run of its own.
      const [anew] = await waitFor(async () => {
        const rows = await host.query<{ run_id: string }>("SELECT run_id FROM event_log WHERE event_id = ? AND disposition = 'bound'", [secondId]);
        return rows.length > 0 && rows;
      }, 15_000, "the claimed message decided anew");
      expect((await waitForRunOn(host, anew.run_id, 15_000)).message?.content).toBe("re: second");
      expect((await deliver(host, botId, recall, "EvRecallCutShort")).status).toBe(200);
      await new Promise((r) => setTimeout(r, 1_000));
      expect({ started: startedIn.get(channel), pulled: pulledIn.get(channel) ?? [] }).toEqual({ started: ["second"], pulled: [] });
      expect(await host.query("SELECT status, error_message FROM run WHERE run_id = ?", [own.run_id])).toEqual([{ status: "cancelled", error_message: "its message was recalled before it was answered" }]);
    } finally {
      await host.dispose();
    }
  }, 60_000);
});

describe("an edit's version, held by a claim a restart cut short", () => {
  it("a dropped claim decided anew with an edit's words, its new claim cut short by a restart: decided again with that edit's version, so an older edit arriving late changes nothing", async () => {
    let host = await start();
    const channel = "CRECALL2";
    try {
      const botId = await registered(host);
      const agent = { agent_id: "agent-recall-edit", name: channel, runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: channel, bot_id: botId }, concurrency: { strategy: "steer" } };
      expect((await adminCall(host, "POST", "/v1/admin/agents", agent)).status).toBe(201);
      const first = message(channel, "hold and end");
      expect((await deliver(host, botId, first)).status).toBe(200);
      await waitFor(() => startedIn.get(channel)?.length === 1, 10_000, "the first run");
      // Both claimed by the busy run, which ends without pulling them: each is decided anew (the first's run claims the second).
      const [second, third] = [message(channel, "hold and pull"), message(channel, "thrid")];
      for (const m of [second, third]) expect((await deliver(host, botId, m)).status).toBe(200);
      expect((await deliver(host, botId, edit(channel, third.ts, "third, fixed", "1800009999.000022"))).status).toBe(200);
      const idOf = (m: { ts: string }) => `slack:${botId}:msg:${channel}:${m.ts}`;
      const bound = async (m: { ts: string }) => (await host.query<{ disposition: string }>("SELECT disposition FROM event_log WHERE event_id = ?", [idOf(m)]))[0]?.disposition === "bound";
      // The third's new claim (carrying its edit's version) is being written when the instance dies.
      host.databaseOutage({ delayMs: 5_000, matching: "absorbed_into_active_run", queries: 1 });
      gates.gate("hold and end").resolve();
      await waitFor(async () => (await bound(second)) && (await bound(third)), 10_000, "both taken back to be decided anew");
      await new Promise((r) => setTimeout(r, 700));
      await host.dispose();
      host = await start();
      // The next instance takes that claim back and decides it again; the second's run starts holding it.
      await waitFor(() => startedIn.get(channel)?.includes("hold and pull"), 15_000, "the second's run");
      // Slack's late delivery of an older edit of the third.
      expect((await deliver(host, botId, edit(channel, third.ts, "third, half fixed", "1800009999.000021"))).status).toBe(200);
      gates.gate("hold and pull").resolve();
      const [own] = await host.query<{ run_id: string }>("SELECT run_id FROM run WHERE event_id = ?", [idOf(second)]);
      expect((await waitForRunOn(host, own.run_id, 15_000)).message?.content).toBe("re: hold and pull+third, fixed");
      expect({ started: startedIn.get(channel), pulled: pulledIn.get(channel) }).toEqual({ started: ["hold and end", "hold and pull"], pulled: ["third, fixed"] });
    } finally {
      await host.dispose();
    }
  }, 60_000);
});
