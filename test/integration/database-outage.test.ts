import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakePlatform, waitFor, type PlatformCall } from "../support/fake-platform";
import { callHostApi, deferred } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

const BOT_TOKEN = "123456:outage-telegram-bot-token";
const SECRET_TOKEN = "outage-webhook-secret";

/**
 * The database goes away while a run starts (`databaseOutage`: every query
 * fails as an unreachable libSQL would). The run can neither start nor record
 * that it failed, so it is not over: it is tried again after a pause, and its
 * followers see how it really ends.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
let telegram: Awaited<ReturnType<typeof startFakePlatform>>;
/** Chat runs hold here until the test lets them answer. */
const answer = deferred();
/** "think first" runs send a draft, then hold here. */
const thought = deferred();
/** "draft and wait" runs send a draft, then hold here; the fake Telegram holds sends to HELD_CHAT until `sendable`. */
const drafted = deferred();
const sendable = deferred();
const HELD_CHAT = "-7373";

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "outage",
    async onRun({ body }, res) {
      const w = resultWriter(res, body.context.run_id);
      if (body.context.input.text === "think first") {
        w.send("message.delta", { chunk: { role: "assistant", content: "a draft" } });
        await thought.promise;
      } else if (body.context.input.text === "read state during an outage") {
        const ctx = body.context;
        host.databaseOutage({ queries: 1, matching: "runner_state" });
        const read = await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "state.get", { scope: "conversation", key: "k" });
        return w.reply(JSON.stringify(read));
      } else if (body.context.input.text === "marker") {
        // Answered at once.
      } else if (body.context.input.text === "draft and wait") {
        w.send("message.delta", { chunk: { role: "assistant", content: "a draft the user sees" } });
        await drafted.promise;
      } else if (body.context.delivery?.surface === "telegram") await answer.promise;
      w.reply(`done: ${body.context.input.text}`);
    },
  });
  let messageId = 100;
  telegram = await startFakePlatform(async (call: PlatformCall) => {
    if (String(call.body?.chat_id) === HELD_CHAT) await sendable.promise;
    return { json: { ok: true, result: { message_id: ++messageId, chat: { id: Number(call.body?.chat_id) }, text: call.body?.text } } };
  });
  host = await startTestHost({ captureLogs: true, vars: { DB_QUERY_TIMEOUT_MS: "1000" } });
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
  // A debounce gives the test ample time to cut the database between ingress and the run's start.
  const agent = { agent_id: "outage", name: "outage", runner_id: runner.runnerId(), event_types: ["message.received"], concurrency: { debounce_ms: 1500 } };
  expect((await host.admin("POST", "/v1/admin/agents", agent)).status).toBe(201);
});
afterAll(async () => {
  host?.databaseOutage(false);
  answer.resolve();
  thought.resolve();
  drafted.resolve();
  sendable.resolve();
  await host?.dispose();
  await runner?.close();
  await telegram?.close();
});

let updateId = 0;
/**
 * A Telegram bot whose agent (`extra` added to it) runs on the outage runner,
 * and `say(chatId, text)`, which posts a message to it and answers 200.
 */
async function chatBot(agentId: string, extra: Record<string, unknown> = {}) {
  const bot = await host.admin("POST", "/v1/admin/bots", { platform: "telegram", api_base_url: telegram.url, credentials: { bot_token: BOT_TOKEN, secret_token: SECRET_TOKEN } });
  const agent = { agent_id: agentId, name: agentId, runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "bot", id: bot.body.bot_id }, ...extra };
  expect((await host.admin("POST", "/v1/admin/agents", agent)).status).toBe(201);
  return async (chatId: string, text: string) => {
    const id = ++updateId;
    const update = { update_id: id, message: { message_id: id * 10, date: Math.floor(Date.now() / 1000), chat: { id: Number(chatId), type: "group", title: "g" }, from: { id: 1, is_bot: false, first_name: "A" }, text } };
    const res = await fetch(bot.body.webhook_url, { method: "POST", headers: { "x-telegram-bot-api-secret-token": SECRET_TOKEN }, body: JSON.stringify(update) });
    expect(res.status).toBe(200);
  };
}
/** What the fake Telegram was asked to show in a chat (sends and edits). */
const shownIn = (chatId: string) => telegram.callsTo(/\/(sendMessage|editMessageText)$/).filter((c) => String(c.body.chat_id) === chatId);

/** A run whose start meets the outage: it must not end, and runs once the database is back. */
async function startDuring(mode: true | "hang", conversation: string) {
  const posted = await host.postEvent(messageEvent(conversation, "hello"));
  const runId = posted.body.run_id!;
  const stream = await fetch(`${host.url}/v1/runs/${runId}/stream`, { headers: { authorization: `Bearer ${host.adminToken}` } });
  const frames = stream.text();
  host.databaseOutage(mode);
  // The start failed, and so did recording the failure (each call refused, or given up after DB_QUERY_TIMEOUT_MS).
  await expect.poll(() => host.logs().includes(`run ${runId}: failure not recorded`), { timeout: 8_000 }).toBe(true);
  host.databaseOutage(false);
  const ended = await frames;
  expect(ended).toContain("event: end");
  expect(ended).toContain('"status":"completed"');
  expect((await host.waitForRun(runId, 15_000)).message?.content).toBe("done: hello");
  expect(runner.calls.filter((c) => c.body.context.run_id === runId)).toHaveLength(1);
}

describe("a database outage during a Host API call", () => {
  it("answers in §8's shape, a retryable 500 runtime_error that names no query, and the run goes on", async () => {
    const posted = await host.postEvent(messageEvent("outage-host-api", "read state during an outage"));
    const run = await host.waitForRun(posted.body.run_id!, 15_000);
    expect(run.status).toBe("completed");
    const read = JSON.parse(String(run.message?.content));
    expect(read).toEqual({ status: 500, body: { ok: false, error: { code: "runtime_error", message: "the host failed while serving this call; it may be tried again", retryable: true, details: {} } } });
    expect(host.logs()).toContain(`run ${posted.body.run_id}: state.get failed in the host`);
  });
});

describe("a database outage while a run starts", () => {
  it("keeps the run and its followers waiting, then runs it once the database is back", () => startDuring(true, "outage-refused"), 25_000);
  it("gives up on a database that does not answer (DB_QUERY_TIMEOUT_MS), and likewise runs it later", () => startDuring("hang", "outage-hang"), 25_000);
});

describe("a database outage while a chat run ends", () => {
  it("ends the run once the database is back, and still tells the user it failed", async () => {
    const say = await chatBot("outage-chat");
    await say("-4242", "are you there?");
    await waitFor(() => runner.calls.some((c) => c.body.context.input.text === "are you there?"));
    const runId = runner.calls.find((c) => c.body.context.input.text === "are you there?")!.body.context.run_id;

    // The runner answers while the database is away: the answer cannot be recorded, nor the failure.
    host.databaseOutage(true);
    answer.resolve();
    await expect.poll(() => host.logs().includes(`run ${runId}: failure not recorded`), { timeout: 8_000 }).toBe(true);
    host.databaseOutage(false);

    // Left running with no session, the run is ended as lost, and the chat hears about it.
    expect(await host.waitForRun(runId, 20_000)).toMatchObject({ status: "failed", error: { code: "host.session_lost" } });
    const records = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE run_id = ? AND event_type = 'run.failed'", [runId]);
    expect(records.map((r) => JSON.parse(r.data_json).code)).toEqual(["host.session_lost"]);
    const notices = await waitFor(() => shownIn("-4242").length > 0 && shownIn("-4242"));
    expect(notices.map((c) => c.body.text)).toEqual(["Sorry, I could not answer this time."]);
  }, 30_000);
});

describe("a lost chat run whose draft the user never saw", () => {
  it("still tells the user it failed: what counts is what a platform accepted, not what the runner sent", async () => {
    // Streaming off: the draft is in the ledger, never on screen.
    const say = await chatBot("outage-draft", { delivery_policy: { streaming: false } });
    await say("-6262", "think first");
    const runId = await waitFor(() => runner.calls.find((c) => c.body.context.input.text === "think first")?.body.context.run_id);
    await expect.poll(async () => (await host.query("SELECT 1 FROM run_event WHERE run_id = ? AND type = 'message.delta'", [runId])).length).toBe(1);
    host.databaseOutage(true);
    thought.resolve();
    await expect.poll(() => host.logs().includes(`run ${runId}: failure not recorded`), { timeout: 8_000 }).toBe(true);
    host.databaseOutage(false);
    expect(await host.waitForRun(runId, 20_000)).toMatchObject({ status: "failed", error: { code: "host.session_lost" } });
    const sent = await waitFor(() => shownIn("-6262").length > 0 && shownIn("-6262"));
    expect(sent.map((c) => c.body.text)).toEqual(["Sorry, I could not answer this time."]);
  }, 30_000);
});

describe("a lost chat run whose draft reached the user while the database was away", () => {
  it("sends no failure notice after it: the run's own reply knows what it showed", async () => {
    const say = await chatBot("outage-seen");
    await say(HELD_CHAT, "draft and wait");
    const runId = await waitFor(() => runner.calls.find((c) => c.body.context.input.text === "draft and wait")?.body.context.run_id);
    const toChat = () => shownIn(HELD_CHAT);
    // The draft's send is on its way (held by the platform) when the database goes.
    await waitFor(() => toChat().length > 0);
    host.databaseOutage(true);
    drafted.resolve();
    await expect.poll(() => host.logs().includes(`run ${runId}: failure not recorded`), { timeout: 8_000 }).toBe(true);
    // The platform takes the draft; the trail cannot record it.
    sendable.resolve();
    await expect.poll(() => host.logs().includes(`run ${runId}: delivery record not written`), { timeout: 8_000 }).toBe(true);
    host.databaseOutage(false);
    expect(await host.waitForRun(runId, 20_000)).toMatchObject({ status: "failed", error: { code: "host.session_lost" } });
    // A barrier: a notice goes out as the run is ended, long before a later message of the chat is answered.
    await say(HELD_CHAT, "marker");
    await waitFor(() => toChat().some((c) => c.body.text === "done: marker"));
    expect(toChat().map((c) => c.body.text)).not.toContain("Sorry, I could not answer this time.");
    expect(toChat()[0].body.text).toBe("a draft the user sees");
  }, 30_000);
});

describe("a database failure as a chat run starts", () => {
  it("ends the run as the host's failure, and the chat hears of it", async () => {
    const say = await chatBot("outage-start", { concurrency: { debounce_ms: 1000 } });
    await say("-5151", "hello?");
    // The run's claim (the one query that sets started_at), once its debounce is over, fails; recording the failure does not.
    host.databaseOutage({ queries: 1, matching: "started_at" });
    const notices = await waitFor(() => shownIn("-5151").length > 0 && shownIn("-5151"));
    expect(notices.map((c) => c.body.text)).toEqual(["Sorry, I could not answer this time."]);
    const runs = await host.admin("GET", "/v1/runs?limit=50");
    const run = runs.body.items.find((r: any) => r.agent_id === "outage-start");
    expect(run).toMatchObject({ status: "failed", error: { code: "host.internal_error" } });
    // Its end is an EventLog fact too, written with it, once.
    const records = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE run_id = ? AND event_type = 'run.failed'", [run.run_id]);
    expect(records.map((r) => JSON.parse(r.data_json).code)).toEqual(["host.internal_error"]);
    expect(runner.calls.filter((c) => c.body.context.input.text === "hello?")).toEqual([]);
  }, 20_000);
});

describe("a database outage at ingress", () => {
  it("refuses the event and keeps none of the attachment blobs it stored for it", async () => {
    const before = await host.r2Keys("artifacts/");
    host.databaseOutage(true);
    try {
      const res = await host.postEvent(messageEvent("outage-ingress", "with a file", { input: { text: "with a file", attachments: [{ content_base64: Buffer.from("hello").toString("base64"), name: "a.txt" }] } }));
      expect(res.status).toBe(500);
    } finally {
      host.databaseOutage(false);
    }
    expect(await host.r2Keys("artifacts/")).toEqual(before);
  });
});

describe("a database outage during the retention cron", () => {
  it("fails the sweep and logs why on one line (npm start's Miniflare prints nothing of a cron's exception)", async () => {
    host.databaseOutage(true);
    try {
      await expect(host.triggerScheduled()).rejects.toThrow(/outcome exception/);
    } finally {
      host.databaseOutage(false);
    }
    await expect.poll(() => host.logs()).toMatch(/^retention failed: steps failed: artifacts \(.*database unavailable \(outage drill\)\), .*; the others ran: \{.*\}$/m);
  });
});
