/**
 * §7: strict payloads that fail validation are dropped: no host effect. A
 * message.completed's effect is "assistant transcript item; delivered". A
 * dropped one must be neither.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { startFakePlatform, waitFor, type FakeReply, type PlatformCall } from "../support/fake-platform";
import { resultWriter, startAdHocRunner } from "../support/runner";

const SECRET_TOKEN = "tg-secret-token-0123456789";
let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
let webhookUrl = "";
let messageId = 100;

const telegramApi = (call: PlatformCall): FakeReply => ({ json: { ok: true, result: { message_id: ++messageId, chat: { id: Number(call.body?.chat_id) }, text: call.body?.text } } });

beforeAll(async () => {
  fake = await startFakePlatform(telegramApi);
  runner = await startAdHocRunner({
    name: "dropped",
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      const mode = String(ctx.input.text);
      if (mode === "invalid_then_real") {
        // Top-level extra key: MessageCompletedDataSchema is strict, so the host drops this result.
        w.send("message.completed", { message: { role: "assistant", content: "DROPPED ANSWER" }, note: "extra" });
        w.send("message.completed", { message: { role: "assistant", content: "the real answer" } });
        w.send("run.completed", { finish_reason: "stop" });
        res.end();
        return;
      }
      if (mode === "only_invalid") {
        w.send("message.completed", { message: { role: "assistant", content: "DROPPED ANSWER" }, note: "extra" });
        w.send("run.completed", { finish_reason: "stop" });
        res.end();
        return;
      }
      if (mode === "invalid_terminal_first") {
        // An invalid run.completed (empty finish_reason) is dropped: the run goes on.
        w.send("run.completed", { finish_reason: "", message: { role: "assistant", content: "PREMATURE ANSWER" } });
        await new Promise((r) => setTimeout(r, 300));
        w.send("message.completed", { message: { role: "assistant", content: "the real answer" } });
        w.send("run.completed", { finish_reason: "stop" });
        res.end();
        return;
      }
      if (mode === "invalid_delta") {
        // A delta with a top-level extra key: MessageDeltaDataSchema is strict, so the host drops it.
        w.send("message.delta", { chunk: { role: "assistant", content: "DROPPED DELTA " }, index: 0 });
        await new Promise((r) => setTimeout(r, 1500));
        w.send("message.completed", { message: { role: "assistant", content: "the real answer" } });
        w.send("run.completed", { finish_reason: "stop" });
        res.end();
        return;
      }
      w.reply("echo");
    },
  });
  host = await startTestHost();
  const created = await host.admin("POST", "/v1/admin/bots", { platform: "telegram", name: "tg", api_base_url: fake.url, credentials: { bot_token: "123456:TEST-telegram-bot-token-abcdefgh", secret_token: SECRET_TOKEN } });
  webhookUrl = created.body.webhook_url;
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "dropped-chat", scope: { type: "bot", id: created.body.bot_id } });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

let updateId = 0;
const sentTexts = (chat: number) => fake.callsTo(/\/(sendMessage|editMessageText)$/).filter((c) => Number(c.body.chat_id) === chat).map((c) => c.body.text);

async function chatRun(chat: number, text: string) {
  const body = { update_id: ++updateId, message: { message_id: updateId, date: Math.floor(Date.now() / 1000), chat: { id: chat, type: "group" }, from: { id: 42, is_bot: false, first_name: "A" }, text } };
  const res = await fetch(webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": SECRET_TOKEN }, body: JSON.stringify(body) });
  expect(res.status).toBe(200);
  const runId = await waitFor(async () => (await host.admin("GET", `/v1/runs?conversation_id=${chat}`)).body.items[0]?.run_id, 10_000, "the run");
  const run = await host.waitForRun(runId);
  // The delivery trail is written after the run: wait for its outcome.
  await waitFor(async () => (await host.query("SELECT 1 FROM event_log WHERE run_id = ? AND event_type IN ('delivery.succeeded','delivery.failed')", [runId])).length > 0, 10_000, "delivery");
  await new Promise((r) => setTimeout(r, 300));
  const transcript = (await host.query<{ content: string }>("SELECT content FROM transcript WHERE run_id = ? AND role = 'assistant' ORDER BY seq", [runId])).map((r) => r.content);
  return { status: run.status, error: run.error?.code ?? null, transcript, sent: sentTexts(chat) };
}

describe("a result the host dropped as invalid is never delivered", () => {
  it("an invalid message.completed before the real one: only the real answer reaches the chat", async () => {
    expect(await chatRun(-9101, "invalid_then_real")).toEqual({ status: "completed", error: null, transcript: ["the real answer"], sent: ["the real answer"] });
  });

  it("a run whose only message was dropped fails runner.no_output, and the chat hears the failure notice, not the dropped text", async () => {
    expect(await chatRun(-9102, "only_invalid")).toEqual({ status: "failed", error: "runner.no_output", transcript: [], sent: ["Sorry, I could not answer this time."] });
  });

  it("an invalid run.completed (dropped, the run goes on) does not deliver its message", async () => {
    expect(await chatRun(-9103, "invalid_terminal_first")).toEqual({ status: "completed", error: null, transcript: ["the real answer"], sent: ["the real answer"] });
  });

  it("a delta the host dropped as invalid is never streamed to the chat", async () => {
    const out = await chatRun(-9104, "invalid_delta");
    expect({ ...out, sent: out.sent.filter((t: string) => t.includes("DROPPED")) }).toEqual({ status: "completed", error: null, transcript: ["the real answer"], sent: [] });
  });
});
