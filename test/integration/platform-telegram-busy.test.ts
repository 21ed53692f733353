import type { ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runOf, startSteererAndPlain } from "../support/conversation-runners";
import { sayOnTelegram, startFakePlatform, telegramBotApi, waitFor } from "../support/fake-platform";
import { putAgent } from "../support/scripted-runner";
import type { TestHost } from "../support/host";
import type { RunCall } from "../support/runner";

/** Telegram messages bursting into a busy chat, under steer and interrupt: each message one fate, one reply per run that answered. */
const BOT_TOKEN = "123456:TEST-telegram-busy-abcdefgh";
const SECRET = "tg-busy-secret-0123456789";
let setup: Awaited<ReturnType<typeof startSteererAndPlain>>;
let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let botId: string;
let webhookUrl: string;
const runsOf = new Map<string, string[]>();
const pulledOf = new Map<string, string[]>();

async function behave(call: RunCall, res: ServerResponse) {
  const { ctx, w, conversation, text, api } = runOf(call, res);
  runsOf.set(conversation, [...(runsOf.get(conversation) ?? []), text]);
  if (text.startsWith("hold")) await setup.gate(conversation).promise;
  const items = ctx.config.pull === "all" ? ((await api("steering.pull")).body.data?.items ?? []) : [];
  pulledOf.set(conversation, [...(pulledOf.get(conversation) ?? []), ...items.map((i: any) => i.input.text)]);
  w.reply(`re: ${[text, ...items.map((i: any) => i.input.text)].join("+")}`);
}

beforeAll(async () => {
  fake = await startFakePlatform(telegramBotApi(BOT_TOKEN));
  setup = await startSteererAndPlain(behave, (steering) => [{ name: "default", label: { en_US: "r" }, capabilities: { streaming: true, steering }, permissions: {} }]);
  host = setup.host;
  const created = await host.admin("POST", "/v1/admin/bots", { platform: "telegram", name: "tg", api_base_url: fake.url, credentials: { bot_token: BOT_TOKEN, secret_token: SECRET } });
  expect(created.status).toBe(201);
  botId = created.body.bot_id;
  webhookUrl = created.body.webhook_url;
});
afterAll(async () => {
  await setup?.dispose();
  await fake?.close();
});

const sent = (chat: string) => fake.callsTo(/\/sendMessage$/).filter((c) => String(c.body?.chat_id) === chat).map((c) => c.body.text as string);

async function messageEvents(chat: string) {
  return host.query<{ event_id: string; disposition: string; run_id: string | null; summary: string }>(
    "SELECT event_id, disposition, run_id, input_summary AS summary FROM event_log WHERE conversation_id = ? AND event_type = 'message.received' ORDER BY seq",
    [chat],
  );
}

async function quiet(chat: string) {
  await waitFor(async () => (await host.query<{ n: number }>("SELECT count(*) AS n FROM run WHERE conversation_id = ? AND status IN ('created','running')", [chat]))[0].n === 0, 30_000, "quiet");
  await new Promise((r) => setTimeout(r, 500));
}

describe("a Telegram chat busy with a run", () => {
  it("steer: ten messages at once are pulled by the run (or dropped), and the chat gets one reply per run", async () => {
    const chat = "-70001";
    await putAgent(host, { agent_id: "tg-steer", name: "s", runner_id: setup.steerer.runnerId(), runner_config: { pull: "all" }, scope: { type: "conversation", id: chat, bot_id: botId }, concurrency: { strategy: "steer" } });
    expect((await sayOnTelegram(webhookUrl, SECRET, chat, "hold first")).status).toBe(200);
    await waitFor(() => (runsOf.get(chat) ?? []).length === 1, 10_000, "the first run");
    const acks = await Promise.all(Array.from({ length: 10 }, (_, i) => sayOnTelegram(webhookUrl, SECRET, chat, `t${i}`)));
    expect(acks.map((a) => a.status)).toEqual(acks.map(() => 200));
    setup.gate(chat).resolve();
    await quiet(chat);
    const events = await messageEvents(chat);
    expect(events).toHaveLength(11);
    expect(events.filter((e) => e.disposition === "steered")).toHaveLength(10);
    const completed = await host.query<{ n: number }>("SELECT count(*) AS n FROM run WHERE conversation_id = ? AND status = 'completed'", [chat]);
    expect({ runs: runsOf.get(chat), replies: sent(chat).length }).toEqual({ runs: ["hold first"], replies: completed[0].n });
    expect([...(pulledOf.get(chat) ?? [])].sort()).toEqual(Array.from({ length: 10 }, (_, i) => `t${i}`).sort());
  }, 60_000);

  it("interrupt: ten messages at once, one run answers, the interrupted ones stay silent", async () => {
    const chat = "-70002";
    await putAgent(host, { agent_id: "tg-interrupt", name: "i", runner_id: setup.plain.runnerId(), runner_config: { pull: "never" }, scope: { type: "conversation", id: chat, bot_id: botId }, concurrency: { strategy: "interrupt" } });
    expect((await sayOnTelegram(webhookUrl, SECRET, chat, "hold first")).status).toBe(200);
    await waitFor(() => (runsOf.get(chat) ?? []).length === 1, 10_000, "the first run");
    await Promise.all(Array.from({ length: 10 }, (_, i) => sayOnTelegram(webhookUrl, SECRET, chat, `hold ${i}`)));
    await waitFor(async () => (await host.query<{ n: number }>("SELECT count(*) AS n FROM run WHERE conversation_id = ? AND status IN ('created','running')", [chat]))[0].n <= 1, 10_000, "one run left");
    setup.gate(chat).resolve();
    await quiet(chat);
    const runs = await host.query<{ status: string }>("SELECT status FROM run WHERE conversation_id = ?", [chat]);
    expect(runs.filter((r) => r.status === "completed")).toHaveLength(1);
    expect(runs.filter((r) => r.status === "cancelled")).toHaveLength(10);
    expect(sent(chat)).toHaveLength(1);
    expect(sent(chat)[0]).toMatch(/^re: hold \d$/);
  }, 60_000);
});
