import { createHmac } from "node:crypto";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT } from "../../local/build";
import { startHost, type LocalHost } from "../../local/host";
import { adminCall } from "../../local/setup";
import { runOf } from "../support/conversation-runners";
import { startFakePlatform, waitFor, type FakeReply, type PlatformCall } from "../support/fake-platform";
import { ADMIN_TOKEN, waitForRunOn } from "../support/host";
import { startAdHocRunner } from "../support/runner";

/**
 * A Slack message deleted while its run waits (its debounce window) holding later messages it claimed: the recall
 * writes its marks in libSQL, then the conversation's object swaps the first claimed message in (its
 * `steering.injected` written first). The instance dies between the two: the next one must not start the run with the
 * deleted message's words before Slack sends the deletion again (README "A message recalled or edited").
 */
const BOT_TOKEN = "xoxb-TEST-restart-recall-token-123456";
const SIGNING_SECRET = "restart-recall-signing-secret-0123456";
let dataDir: string;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
/** The texts runs started with, and what their pulls returned. */
const started: string[] = [];
const pulled: string[] = [];

/** One port for both instances: a run's job keeps the host's URL its event came in on, for its runner's Host API calls. */
let port = 0;
const start = () => startHost({ adminToken: ADMIN_TOKEN, dataDir, port, scriptPath: join(ROOT, "dist/test/worker.js"), vars: { DB_QUERY_TIMEOUT_MS: "30000" } });

function slackApi(call: PlatformCall): FakeReply {
  if (call.path === "/chat.postMessage") return { json: { ok: true, channel: call.body.channel, ts: `${Date.now() / 1000}` } };
  if (call.path === "/chat.update") return { json: { ok: true, channel: call.body.channel, ts: call.body.ts } };
  return { status: 404, json: { ok: false, error: "unknown_method" } };
}

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "agent-host-restart-recall-"));
  const probe = createServer().listen(0, "127.0.0.1");
  await once(probe, "listening");
  port = (probe.address() as AddressInfo).port;
  await new Promise((r) => probe.close(r));
  fake = await startFakePlatform(slackApi);
  runner = await startAdHocRunner({
    name: "steerer",
    runners: [{ name: "default", label: { en_US: "steerer" }, capabilities: { streaming: true, steering: true }, permissions: {} }],
    async onRun(call, res) {
      const { w, text, api } = runOf(call, res);
      started.push(text);
      const items = ((await api("steering.pull")).body.data?.items ?? []).map((i: any) => i.input.text as string);
      pulled.push(...items);
      w.reply(`re: ${[text, ...items].join("+")}`);
    },
  });
});
afterAll(async () => {
  await runner?.close();
  await fake?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

let eventSeq = 0;
async function deliver(host: LocalHost, botId: string, event: Record<string, unknown>, eventId = `EvRecall${++eventSeq}`) {
  const body = JSON.stringify({ token: "legacy", team_id: "T1", api_app_id: "A1", type: "event_callback", event_id: eventId, event_time: Math.floor(Date.now() / 1000), event });
  const timestamp = String(Math.floor(Date.now() / 1000));
  const signature = `v0=${createHmac("sha256", SIGNING_SECRET).update(`v0:${timestamp}:${body}`).digest("hex")}`;
  return fetch(`${host.url}/v1/webhooks/slack/${botId}`, { method: "POST", headers: { "content-type": "application/json", "x-slack-request-timestamp": timestamp, "x-slack-signature": signature }, body });
}
let messageTs = 1_800_000_000;
const message = (channel: string, text: string) => ({ type: "message", channel, channel_type: "channel", user: "U42", text, ts: `${++messageTs}.000200`, team: "T1" });
const deletion = (channel: string, ts: string) => ({ type: "message", subtype: "message_deleted", hidden: true, channel, ts: `${++messageTs}.000900`, deleted_ts: ts, previous_message: { type: "message", user: "U42", ts, text: "gone" } });

describe("a recall whose work in the conversation's object a restart cut short", () => {
  it("a claimed message swapped in for the deleted one, its injected record written as the instance died: the deleted message is never answered; the claimed one is, once", async () => {
    let host = await start();
    const channel = "CRECALL1";
    try {
      expect((await adminCall(host, "POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
      const bot = await adminCall<{ bot_id: string }>(host, "POST", "/v1/admin/bots", { platform: "slack", workspace_id: "acme", api_base_url: fake.url, credentials: { bot_token: BOT_TOKEN, signing_secret: SIGNING_SECRET } });
      const botId = bot.body.bot_id;
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
      expect({ started, pulled }).toEqual({ started: ["second"], pulled: [] });
      expect(await host.query("SELECT status, error_message FROM run WHERE run_id = ?", [own.run_id])).toEqual([{ status: "cancelled", error_message: "its message was recalled before it was answered" }]);
    } finally {
      await host.dispose();
    }
  }, 60_000);
});
