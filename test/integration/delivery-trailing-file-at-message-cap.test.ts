import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { addTelegramBot, type FakeReply, type PlatformCall, sayOnTelegram, startFakePlatform, waitFor } from "../support/fake-platform";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * Commit 6c29976 (ShownCap): a run shows at most DELIVERY_MAX_PARTS of its messages "and at most that many of its
 * files, and after its end one more message says how many of each it sent beyond them" (README, Delivery). A run
 * that sends exactly DELIVERY_MAX_PARTS messages and then announces one file (announced after its last message: sent
 * on its own) never sent a message beyond the cap, yet the files-alone reply is counted by ShownCap as a message
 * cut: the chat is told "(1 more message and 1 more file of this answer are not shown here.)".
 */
const BOT_TOKEN = "123456:CAPTRAIL-telegram-bot-token-abcdefgh";
const SECRET_TOKEN = "tg-secret-token-captrail-0123456789";

let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
let webhookUrl: string;
let nextId = 100;

function api(call: PlatformCall): FakeReply {
  if (/\/send(Message|Document)$/.test(call.path)) return { json: { ok: true, result: { message_id: ++nextId } } };
  if (call.path.endsWith("/editMessageText")) return { json: { ok: true, result: { message_id: call.body.message_id } } };
  return { json: { ok: true, result: true } };
}

beforeAll(async () => {
  fake = await startFakePlatform(api);
  runner = await startAdHocRunner({
    name: "cap-trailing-file",
    async onRun({ body }, res) {
      const ctx = body.context;
      const w = resultWriter(res, ctx.run_id);
      for (let i = 1; i <= 3; i++) w.send("message.completed", { message: { role: "assistant", content: `message ${i}` } });
      w.send("artifact.created", { artifact_type: "file", mime_type: "text/plain", name: "report.txt", content_base64: Buffer.from("report").toString("base64") });
      w.send("run.completed", { finish_reason: "stop" });
      res.end();
    },
  });
  host = await startTestHost({ vars: { DELIVERY_MAX_PARTS: "3" } });
  ({ webhookUrl } = await addTelegramBot(host, { apiBaseUrl: fake.url, botToken: BOT_TOKEN, secretToken: SECRET_TOKEN }, { runner, agentId: "cap-trailing-file" }));
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

const sentTo = (chat: string) => fake.callsTo(/\/sendMessage$/).filter((c) => String(c.body.chat_id) === chat).map((c) => c.body.text as string);

describe("a run at exactly DELIVERY_MAX_PARTS messages with one file after them", () => {
  it("never tells the chat a message was not shown: every message it sent was", async () => {
    const chat = "-100661";
    expect((await sayOnTelegram(webhookUrl, SECRET_TOKEN, chat, "go")).status).toBe(200);
    const [run] = await waitFor(async () => {
      const rows = await host.query<{ run_id: string }>("SELECT run_id FROM run WHERE conversation_id = ?", [chat]);
      return rows.length > 0 && rows;
    }, 10_000, "the run");
    await host.waitForRun(run.run_id);
    await waitFor(() => sentTo(chat).length >= 3, 10_000, "the messages");
    await new Promise((r) => setTimeout(r, 1_000));
    const sent = sentTo(chat);
    expect(sent.slice(0, 3)).toEqual(["message 1", "message 2", "message 3"]);
    expect(sent.filter((t) => /more message/.test(t))).toEqual([]);
    // The file is within the files' own cap (none shown yet): it reaches the chat.
    const documents = fake.callsTo(/\/sendDocument$/).filter((c) => /name="chat_id"\r\n\r\n([^\r]*)/.exec(c.raw)?.[1] === chat);
    expect(documents).toHaveLength(1);
  });
});
