/**
 * Files in answers where delivery must follow what the host accepted (the
 * transcript) and lose neither a file nor an answer: a dropped blank message,
 * a dropped artifact.created, a photo Telegram refuses, a streamed reply
 * completed by files alone, a file sent after the last message.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { addTelegramBot, ANSWER_FILE, type FakeReply, formOf, type PlatformCall, startFakePlatform, waitFor } from "../support/fake-platform";
import { resultWriter, startAdHocRunner } from "../support/runner";

const BOT_TOKEN = "123456:TEST-telegram-bot-token-abcdefgh";
const SECRET_TOKEN = "tg-secret-token-0123456789";
const PHOTO = new Uint8Array([0xff, 0xd8, 0xff, 0xe0, 1, 2, 3, 4]);
/** Chats whose sendPhoto Telegram refuses as it does for a photo past its documented dimensions (w+h ≤ 10000, ratio ≤ 20). */
const BAD_DIMENSIONS = new Set(["-703"]);
/** Chats whose first sendDocument Telegram answers 502 while the file's stored bytes are removed (say, by retention) before the retry. */
const VANISHING = new Set(["-705"]);

let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
let webhookUrl = "";
let nextMessageId = 100;
const contexts: any[] = [];

const chatOf = (call: PlatformCall) => String(call.body?.chat_id ?? /name="chat_id"\r\n\r\n([^\r]*)/.exec(call.raw)?.[1]);

async function telegramApi(call: PlatformCall): Promise<FakeReply> {
  const m = /^\/(file\/)?bot([^/]+)\/(.+)$/.exec(call.path);
  if (!m || m[2] !== BOT_TOKEN) return { status: 401, json: { ok: false, error_code: 401, description: "Unauthorized" } };
  if (m[1]) return { bytes: PHOTO, headers: { "content-type": "image/jpeg" } };
  const method = m[3];
  if (method === "getFile") return { json: { ok: true, result: { file_id: call.body.file_id, file_path: `photos/${call.body.file_id}.jpg` } } };
  if (method === "sendPhoto" && BAD_DIMENSIONS.has(chatOf(call))) return { status: 400, json: { ok: false, error_code: 400, description: "Bad Request: PHOTO_INVALID_DIMENSIONS" } };
  if (method === "sendDocument" && VANISHING.delete(chatOf(call))) {
    const [row] = await host.query<{ r2_key: string }>("SELECT r2_key FROM artifact WHERE name = 'gone.pdf'");
    await host.r2Delete(row.r2_key);
    return { status: 502, json: { ok: false, error_code: 502, description: "Bad Gateway" } };
  }
  return { json: { ok: true, result: { message_id: ++nextMessageId } } };
}

beforeAll(async () => {
  fake = await startFakePlatform(telegramApi);
  runner = await startAdHocRunner({
    name: "answer-files",
    async onRun({ body }, res) {
      const ctx = body.context;
      contexts.push(ctx);
      const w = resultWriter(res, ctx.run_id);
      const mode = String(ctx.input.text ?? "");
      const inline = { artifact_type: "image", mime_type: "image/png", name: "chart.png", content_base64: ANSWER_FILE.toString("base64") };
      if (mode === "blank_then_final") {
        // A blank message.completed is dropped by the host (§7); the answer is run.completed's message.
        w.send("artifact.created", inline);
        w.send("message.completed", { message: { role: "assistant", content: "" } });
        w.send("run.completed", { finish_reason: "stop", message: { role: "assistant", content: "here is the chart" } });
      } else if (mode === "invalid_ref") {
        // Not a valid artifact.created (strict payload: an unknown key), so the host drops it: no transcript ref.
        w.send("artifact.created", { artifact_type: "image", artifact_id: ctx.input.attachments[0].artifact_id, not_a_field: true });
        w.send("message.completed", { message: { role: "assistant", content: "done" } });
        w.send("run.completed", { finish_reason: "stop" });
      } else if (mode === "unknown_ref") {
        // A valid artifact.created naming an artifact that does not exist: refused when checked against the store.
        w.send("artifact.created", { artifact_type: "file", artifact_id: "art_never_stored" });
        w.send("message.completed", { message: { role: "assistant", content: "done" } });
        w.send("run.completed", { finish_reason: "stop" });
      } else if (mode === "stream_then_file") {
        // Streams its words, then completes with a message that is only the file (no text element).
        w.send("message.delta", { chunk: { role: "assistant", content: "Here is " } });
        await new Promise((r) => setTimeout(r, 300));
        w.send("message.delta", { chunk: { role: "assistant", content: "the chart you asked for." } });
        w.send("artifact.created", inline);
        w.send("message.completed", { message: { role: "assistant", content: [{ type: "image", artifact_id: ctx.input.attachments[0].artifact_id }] } });
        w.send("run.completed", { finish_reason: "stop" });
      } else if (mode === "vanishing_file") {
        w.send("artifact.created", { artifact_type: "file", mime_type: "application/pdf", name: "gone.pdf", content_base64: ANSWER_FILE.toString("base64") });
        w.send("message.completed", { message: { role: "assistant", content: "the report" } });
        w.send("run.completed", { finish_reason: "stop" });
      } else if (mode === "file_after_message") {
        // The text first, then the file it announces, then a bare completion: no message left to carry the file.
        w.send("message.completed", { message: { role: "assistant", content: "here is your report" } });
        w.send("artifact.created", { artifact_type: "file", mime_type: "application/pdf", name: "after.pdf", content_base64: ANSWER_FILE.toString("base64") });
        w.send("run.completed", { finish_reason: "stop" });
      } else if (mode === "file_then_crash") {
        // The same, then the stream breaks off before any terminal result: the run fails, what it made is kept.
        w.send("message.completed", { message: { role: "assistant", content: "here is half" } });
        w.send("artifact.created", { artifact_type: "file", mime_type: "application/pdf", name: "half.pdf", content_base64: ANSWER_FILE.toString("base64") });
      } else if (mode === "file_repeated") {
        // The same file (this conversation's input) announced after the last message, again and again.
        w.send("message.completed", { message: { role: "assistant", content: "here is your picture" } });
        for (let i = 0; i < 5; i++) w.send("artifact.created", { artifact_type: "image", artifact_id: ctx.input.attachments[0].artifact_id });
        w.send("run.completed", { finish_reason: "stop" });
      } else if (mode === "tall_png") {
        w.send("artifact.created", { ...inline, name: "tall-screenshot.png" });
        w.send("message.completed", { message: { role: "assistant", content: "the screenshot" } });
        w.send("run.completed", { finish_reason: "stop" });
      } else {
        w.send("message.completed", { message: { role: "assistant", content: "?" } });
        w.send("run.completed", { finish_reason: "stop" });
      }
      res.end();
    },
  });
  host = await startTestHost();
  ({ webhookUrl } = await addTelegramBot(host, { apiBaseUrl: fake.url, botToken: BOT_TOKEN, secretToken: SECRET_TOKEN, name: "tg" }, { runner: runner, agentId: "answer-files" }));
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

let updateId = 5000;
async function post(chat: string, message: Record<string, unknown>) {
  const id = ++updateId;
  const body = { update_id: id, message: { message_id: id, date: Math.floor(Date.now() / 1000), chat: { id: Number(chat), type: "group" }, from: { id: 42, is_bot: false, first_name: "A" }, ...message } };
  const res = await fetch(webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": SECRET_TOKEN }, body: JSON.stringify(body) });
  expect(res.status).toBe(200);
}
const callsTo = (method: string, chat: string) => fake.callsTo(new RegExp(`/${method}$`)).filter((c) => chatOf(c) === chat);
const runOf = async (chat: string) => (await waitFor(() => contexts.find((c) => c.conversation.conversation_id === chat))).run_id as string;

describe("files in answers follow the transcript and lose nothing", () => {
  it("a blank message.completed (dropped by the host) does not swallow run.completed's answer, which carries the file in the transcript", async () => {
    await post("-701", { text: "blank_then_final" });
    const runId = await runOf("-701");
    const run = await host.waitForRun(runId);
    expect(run.status).toBe("completed");
    // The transcript: the file belongs to run.completed's message "here is the chart".
    const [item] = await host.query<{ content: string; artifact_refs_json: string }>("SELECT content, artifact_refs_json FROM transcript WHERE run_id = ? AND role = 'assistant'", [runId]);
    expect(item.content).toBe("here is the chart");
    expect(JSON.parse(item.artifact_refs_json)).toHaveLength(1);
    // Delivery: that answer's text must reach the user.
    await waitFor(() => callsTo("sendPhoto", "-701").length > 0, 15_000, "the photo");
    await new Promise((r) => setTimeout(r, 1000));
    expect(callsTo("sendMessage", "-701").map((c) => c.body.text)).toContain("here is the chart");
  });

  it("an artifact.created the host dropped as invalid (no transcript ref) is not posted", async () => {
    await post("-702", { caption: "invalid_ref", photo: [{ file_id: "p1", width: 80, height: 80 }] });
    const runId = await runOf("-702");
    await host.waitForRun(runId);
    const dropped = await waitFor(async () => (await host.query("SELECT 1 FROM event_log WHERE run_id = ? AND event_type = 'runner.result_dropped'", [runId])).length > 0);
    expect(dropped).toBe(true);
    const [item] = await host.query<{ artifact_refs_json: string }>("SELECT artifact_refs_json FROM transcript WHERE run_id = ? AND role = 'assistant'", [runId]);
    expect(JSON.parse(item.artifact_refs_json)).toEqual([]);
    await waitFor(() => callsTo("sendMessage", "-702").length > 0, 15_000, "the text");
    await new Promise((r) => setTimeout(r, 1000));
    expect(callsTo("sendPhoto", "-702")).toEqual([]);
  });

  it("an artifact.created naming an artifact the run may not attach is not announced: the text goes alone, no file is tried", async () => {
    await post("-709", { text: "unknown_ref" });
    const runId = await runOf("-709");
    expect((await host.waitForRun(runId)).status).toBe("completed");
    await waitFor(() => callsTo("sendMessage", "-709").length > 0, 15_000, "the text");
    const trail = async () => (await host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type LIKE 'delivery.%' ORDER BY seq", [runId])).map((r) => [r.event_type, JSON.parse(r.data_json).operation]);
    await waitFor(async () => (await trail()).some(([type]) => type === "delivery.succeeded"), 15_000, "the text's record");
    await new Promise((r) => setTimeout(r, 1000));
    // Only the text was attempted: no file send, and no failure for a file that was never the run's.
    expect(await trail()).toEqual([
      ["delivery.attempted", "send"],
      ["delivery.succeeded", "send"],
    ]);
    expect(callsTo("sendMessage", "-709").map((c) => c.body.text)).toEqual(["done"]);
    expect([...callsTo("sendDocument", "-709"), ...callsTo("sendPhoto", "-709")]).toEqual([]);
  });

  it("an image Telegram refuses as a photo (PHOTO_INVALID_DIMENSIONS) still reaches the chat, as a document", async () => {
    await post("-703", { text: "tall_png" });
    await waitFor(() => callsTo("sendPhoto", "-703").length > 0, 15_000, "the photo attempt");
    await new Promise((r) => setTimeout(r, 1500));
    const docs = callsTo("sendDocument", "-703");
    expect(docs).toHaveLength(1);
    expect((await formOf(docs[0])).get("document")).not.toBeNull();
  });

  it("a streamed reply completed by a files-only message still ends on the whole streamed text", async () => {
    await post("-704", { caption: "stream_then_file", photo: [{ file_id: "p2", width: 80, height: 80 }] });
    const runId = await runOf("-704");
    await host.waitForRun(runId);
    await waitFor(() => callsTo("sendPhoto", "-704").length >= 2, 15_000, "the photos");
    await new Promise((r) => setTimeout(r, 2000));
    const writes = [...callsTo("sendMessage", "-704"), ...callsTo("editMessageText", "-704")].sort((a, b) => a.at - b.at);
    expect(writes.at(-1)?.body.text).toBe("Here is the chart you asked for.");
  });

  it("a file whose stored bytes are gone when an upload is retried is recorded as unavailable, not as the platform unreachable, and not retried", async () => {
    await post("-705", { text: "vanishing_file" });
    const runId = await runOf("-705");
    await host.waitForRun(runId);
    const failures = async () =>
      (await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE run_id = ? AND event_type = 'delivery.failed' ORDER BY seq", [runId]))
        .map((r) => JSON.parse(r.data_json))
        .filter((d) => d.operation === "send_file");
    const records = await waitFor(async () => {
      const rows = await failures();
      return rows.some((d) => !d.will_retry) && rows;
    }, 20_000, "the final send_file record");
    // The first attempt: the platform's 502, retried.
    expect(records[0]).toMatchObject({ attempt: 1, status: 502, will_retry: true });
    // The retry cannot read the file: storage's fault, final, and said so.
    expect(records.slice(1)).toEqual([expect.objectContaining({ attempt: 2, code: "artifact_unavailable", will_retry: false })]);
    expect(records[1].error).toMatch(/gone\.pdf|no longer stored|artifact/);
  });
  it("a file announced several times after the last message is kept once in the transcript and posted once in the chat", async () => {
    await post("-708", { caption: "file_repeated", photo: [{ file_id: "p1", width: 80, height: 80 }] });
    const runId = await runOf("-708");
    expect((await host.waitForRun(runId)).status).toBe("completed");
    const items = await host.query<{ artifact_refs_json: string }>("SELECT artifact_refs_json FROM transcript WHERE run_id = ? AND role = 'assistant' ORDER BY seq", [runId]);
    expect(items.flatMap((i) => JSON.parse(i.artifact_refs_json))).toHaveLength(1);
    await waitFor(() => callsTo("sendPhoto", "-708").length > 0, 15_000, "the photo");
    // Any repeat would be posted right after the first: a short wait shows none comes.
    await new Promise((r) => setTimeout(r, 1500));
    expect(callsTo("sendPhoto", "-708").length + callsTo("sendDocument", "-708").length).toBe(1);
  });

  it("a file created after the run's last message is kept in the transcript (an item of its own) and sent after the text", async () => {
    await post("-706", { text: "file_after_message" });
    const runId = await runOf("-706");
    expect((await host.waitForRun(runId)).status).toBe("completed");
    const [artifact] = await host.query<{ artifact_id: string }>("SELECT artifact_id FROM artifact WHERE run_id = ?", [runId]);
    const items = await host.query<{ item_type: string; content: string | null; artifact_refs_json: string }>("SELECT item_type, content, artifact_refs_json FROM transcript WHERE run_id = ? AND role = 'assistant' ORDER BY seq", [runId]);
    expect(items.map((i) => [i.item_type, i.content, JSON.parse(i.artifact_refs_json).map((r: { artifact_id: string }) => r.artifact_id)])).toEqual([
      ["message", "here is your report", []],
      ["artifacts", null, [artifact.artifact_id]],
    ]);
    const [doc] = await waitFor(() => callsTo("sendDocument", "-706").length > 0 && callsTo("sendDocument", "-706"), 15_000, "the file");
    expect(callsTo("sendMessage", "-706").map((c) => c.body.text)).toEqual(["here is your report"]);
    expect(callsTo("sendMessage", "-706")[0].at).toBeLessThanOrEqual(doc.at);
    expect((await formOf(doc)).get("document")).not.toBeNull();

    // A run whose stream breaks off after such a file fails, and still keeps and sends it.
    await post("-707", { text: "file_then_crash" });
    const crashed = await runOf("-707");
    expect((await host.waitForRun(crashed)).error?.code).toBe("runner.stream_closed");
    const kept = await host.query<{ item_type: string; artifact_refs_json: string }>("SELECT item_type, artifact_refs_json FROM transcript WHERE run_id = ? AND role = 'assistant' ORDER BY seq", [crashed]);
    expect(kept.map((i) => [i.item_type, JSON.parse(i.artifact_refs_json).length])).toEqual([["message", 0], ["artifacts", 1]]);
    await waitFor(() => callsTo("sendDocument", "-707").length > 0, 15_000, "the file of the run cut short");
  });
});
