import { createHmac } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi, deferred } from "../support/host-api";
import { startFakePlatform, waitFor, type FakeReply, type PlatformCall } from "../support/fake-platform";
import { startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";
import { SLACK_AUTH_TEST } from "../support/slack-events";

/**
 * A chat message steered into a run is answered by that run's reply. A run of the same agent whose reply goes nowhere
 * (a recall: README "a recall has nowhere to reply") must not claim it: its runner would pull the message and answer
 * it into the void, recorded as injected, and the user never hears back. Slack, where recalls run.
 */
const BOT_TOKEN = "xoxb-TEST-steering-reply-target-123";
const SIGNING_SECRET = "slack-signing-secret-steer-0123456789";
let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
let webhookUrl: string;
const gates = new Map<string, ReturnType<typeof deferred<void>>>();
const gate = (channel: string) => gates.get(channel) ?? gates.set(channel, deferred()).get(channel)!;
const begun: { channel: string; type: string; text: string | null }[] = [];

function slackApi(call: PlatformCall): FakeReply {
  // Who the bot token is (its workspace T1, as the envelopes say): the host checks every request against it.
  if (call.path === "/auth.test") return { json: SLACK_AUTH_TEST };
  if (call.path === "/chat.postMessage") return { json: { ok: true, channel: call.body.channel, ts: `${Date.now()}.000100` } };
  if (call.path === "/chat.update") return { json: { ok: true, channel: call.body.channel, ts: call.body.ts } };
  return { status: 404, json: { ok: false, error: "unknown_method" } };
}

beforeAll(async () => {
  fake = await startFakePlatform(slackApi);
  runner = await startAdHocRunner({
    name: "slack-steerer",
    runners: [{ name: "default", label: { en_US: "s" }, capabilities: { streaming: true, steering: true }, permissions: {} }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      const channel = ctx.conversation.conversation_id as string;
      begun.push({ channel, type: ctx.event.event_type, text: ctx.input.text ?? null });
      // `hold…` messages, and recalls in a channel named so, wait for the test; every run then takes what was claimed for it.
      if (String(ctx.input.text ?? "").startsWith("hold") || (ctx.event.event_type === "message.recalled" && channel.includes("HOLD"))) await gate(channel).promise;
      const pulled = await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "steering.pull", { mode: "all" });
      const texts = (pulled.body.data?.items ?? []).map((i: any) => i.input.text);
      w.reply(`re: ${[ctx.input.text ?? ctx.event.event_type, ...texts].join(" + ")}`);
    },
  });
  host = await startTestHost();
  const created = await host.admin("POST", "/v1/admin/bots", { platform: "slack", workspace_id: "acme", api_base_url: fake.url, credentials: { bot_token: BOT_TOKEN, signing_secret: SIGNING_SECRET } });
  expect(created.status).toBe(201);
  webhookUrl = created.body.webhook_url;
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "slack-steer", scope: { type: "bot", id: created.body.bot_id }, eventTypes: ["message.received", "message.recalled"] });
});
afterAll(async () => {
  for (const g of gates.values()) g.resolve();
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

async function post(event: Record<string, unknown>) {
  const body = JSON.stringify({ token: "t", team_id: "T1", api_app_id: "A1", type: "event_callback", event_id: `Ev${crypto.randomUUID()}`, event_time: Math.floor(Date.now() / 1000), event });
  const timestamp = Math.floor(Date.now() / 1000);
  const signature = `v0=${createHmac("sha256", SIGNING_SECRET).update(`v0:${timestamp}:${body}`).digest("hex")}`;
  const res = await fetch(webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-slack-request-timestamp": String(timestamp), "x-slack-signature": signature }, body });
  expect(res.status).toBe(200);
}
let ts = 1_800_000_000;
const say = (channel: string, text: string) => post({ type: "message", channel, channel_type: "channel", user: "U42", text, ts: `${++ts}.000200`, team: "T1" });
const recall = (channel: string) => post({ type: "message", subtype: "message_deleted", channel, deleted_ts: "1700000000.000001", ts: `${++ts}.000300`, previous_message: { user: "U42", ts: "1700000000.000001", text: "never mind" } });
/** Everything the chat was shown: posts and edits. */
const shown = (channel: string) => fake.callsTo(/^\/chat\.(postMessage|update)$/).filter((c) => c.body.channel === channel).map((c) => String(c.body.text));
const quiet = (channel: string) =>
  waitFor(async () => (await host.query<{ n: number }>("SELECT count(*) AS n FROM run WHERE conversation_id = ? AND status IN ('created','running')", [channel]))[0].n === 0, 20_000, "quiet");
const fate = async (channel: string, text: string) =>
  (await host.query<{ disposition: string; event_type: string | null }>(
    "SELECT e.disposition, (SELECT s.event_type FROM event_log s WHERE json_extract(s.data_json, '$.source_event_id') = e.event_id) AS event_type FROM event_log e WHERE e.conversation_id = ? AND e.input_summary = ?",
    [channel, text],
  ))[0];

describe("a chat message steered only into a run whose reply reaches the chat", () => {
  it("is not claimed by a recall's run waiting its turn: the run answering in the chat pulls it", async () => {
    const channel = "C-WAITING-RECALL";
    await say(channel, "hold first");
    await waitFor(() => begun.some((b) => b.channel === channel), 10_000, "the first run");
    await recall(channel);
    await waitFor(async () => (await host.query("SELECT 1 FROM event_log WHERE conversation_id = ? AND event_type = 'message.recalled' AND run_id IS NOT NULL", [channel])).length > 0, 10_000, "the recall's run");
    await say(channel, "second");
    // The webhook is answered once the event is recorded; the conversation decides it a moment later.
    await waitFor(async () => (await fate(channel, "second"))?.disposition === "steered", 10_000, "the second message claimed");
    gate(channel).resolve();
    await quiet(channel);
    await new Promise((r) => setTimeout(r, 500));
    // Claimed by the run answering "hold first", which pulls it: its answer is in the chat.
    expect({ shown: shown(channel).at(-1), fate: await fate(channel, "second") }).toEqual({ shown: "re: hold first + second", fate: { disposition: "steered", event_type: "steering.injected" } });
  });

  it("is not claimed by a recall's run in progress: it is answered by a run of its own", async () => {
    const channel = "C-HOLD-ACTIVE-RECALL";
    await recall(channel);
    await waitFor(() => begun.some((b) => b.channel === channel), 10_000, "the recall's run");
    await say(channel, "later");
    await waitFor(async () => (await fate(channel, "later")) !== undefined, 10_000, "the message");
    // Decided while the recall's run still holds (its own run waits, or it is claimed): the decision is not observable apart.
    await new Promise((r) => setTimeout(r, 1000));
    gate(channel).resolve();
    await quiet(channel);
    await new Promise((r) => setTimeout(r, 500));
    expect({ answered: shown(channel).some((t) => t.includes("later")), fate: await fate(channel, "later") }).toEqual({ answered: true, fate: { disposition: "bound", event_type: null } });
  });
});
