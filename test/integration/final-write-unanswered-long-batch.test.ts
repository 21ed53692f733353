import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { startAdHocRunner } from "../support/runner";
import { startFakePlatform, type PlatformCall, type FakeReply } from "../support/fake-platform";
import { putAgent } from "../support/scripted-runner";
import { chatOfUnansweredFinalWrite, streamOfUnansweredFinalWrite } from "../support/unanswered-final-write";

/**
 * The run's final write (its last batch of results and its end, one batch) gets no answer in time but was applied.
 * The host then reads back what it recorded for the followers (and the chat reply) that have not had it
 * (`endRecordedMeanwhile`). That read must take every page: a last batch of more than one ledger page (here 1,400
 * entries, a page being 1,000) must not leave the followers without the run's final message and `run.completed`.
 */
let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let webhookUrl: string;
const SECRET_TOKEN = "tg-secret-token-probe-long-batch-0123";
let nextMessageId = 100;
function telegramApi(call: PlatformCall): FakeReply {
  if (call.path.endsWith("/sendMessage")) return { json: { ok: true, result: { message_id: ++nextMessageId, chat: { id: Number(call.body.chat_id) }, text: call.body.text } } };
  return { json: { ok: true, result: true } };
}
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
const release = deferred<void>();
const REPLY = "probe-long-final-batch-reply";
const TELEMETRY = 1_400;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "final-long",
    async onRun({ body }, res) {
      const runId = body.context.run_id;
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      if (body.context.input.text === "go") await release.promise;
      // One write: the whole burst reaches the host as one batch, with the reply and run.completed.
      const lines = Array.from({ length: TELEMETRY }, (_, i) => JSON.stringify({ run_id: runId, type: "tool.call.started", data: { tool_call_id: `c${i}`, tool_name: "t", parameters: {} } }));
      lines.push(JSON.stringify({ run_id: runId, type: "message.completed", data: { message: { role: "assistant", content: REPLY } } }));
      lines.push(JSON.stringify({ run_id: runId, type: "run.completed", data: { finish_reason: "stop" } }));
      res.end(lines.join("\n") + "\n");
    },
  });
  host = await startTestHost({ vars: { DB_QUERY_TIMEOUT_MS: "2000" } });
  expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
  fake = await startFakePlatform(telegramApi);
  const bot = await host.admin("POST", "/v1/admin/bots", { platform: "telegram", name: "tg", api_base_url: fake.url, credentials: { bot_token: "123456:TEST-telegram-long-batch", secret_token: SECRET_TOKEN } });
  expect(bot.status).toBe(201);
  webhookUrl = bot.body.webhook_url;
  await putAgent(host, { agent_id: "tg-long", runner_id: runner.runnerId(), scope: { type: "bot", id: bot.body.bot_id } });
});
afterAll(async () => {
  release.resolve();
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

describe("a run whose final write, longer than a ledger page, was applied but not answered in time", () => {
  it("its followers get every entry it recorded, the final message and run.completed included", async () => {
    const c = "probe-final-unanswered-long";
    await putAgent(host, { agent_id: `agent-${c}`, runner_id: runner.runnerId(), scope: { type: "conversation", id: c } });
    const posted = await host.postEvent(messageEvent(c, "go"));
    const runId = posted.body.run_id!;
    // The final batch is held past the Worker's 2 s timeout, then applied; the host-failure end that follows reaches the database after it, and is answered.
    const { sse, run } = await streamOfUnansweredFinalWrite(host, runId, REPLY, release.resolve);
    const recorded = await host.query<{ n: number }>("SELECT COUNT(*) AS n FROM run_event WHERE run_id = ?", [runId]);
    expect(run.status).toBe("completed");
    // The burst was one batch: nothing of it was published before the final write.
    expect(Number(recorded[0].n)).toBe(TELEMETRY + 2);
    expect(sse.end).toBe("completed");
    expect(sse.frames.slice(-2).map((f) => f.type)).toEqual(["message.completed", "run.completed"]);
    expect(sse.frames).toHaveLength(TELEMETRY + 2);
  });

  it("a chat user still gets the reply the run completed with", async () => {
    const { webhookStatus, status, sends } = await chatOfUnansweredFinalWrite({ host, fake, webhookUrl, secretToken: SECRET_TOKEN }, { chat: "-1007711", text: "chat", updateId: 7001, reply: REPLY });
    expect(webhookStatus).toBe(200);
    expect({ status, sends }).toEqual({ status: "completed", sends: [REPLY] });
  });
});
