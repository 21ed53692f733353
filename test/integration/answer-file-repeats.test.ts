/**
 * An `artifact.created {artifact_id}` announced again before it is sent is carried once: files announced after the
 * last message get one transcript item, and each is posted once in the chat however often the runner repeats it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { startFakePlatform, waitFor, type FakeReply, type PlatformCall } from "../support/fake-platform";
import { resultWriter, startAdHocRunner } from "../support/runner";

const BOT_TOKEN = "123456:TEST-telegram-bot-token-abcdefgh";
const SECRET_TOKEN = "tg-secret-token-0123456789";
const PHOTO = new Uint8Array([0xff, 0xd8, 0xff, 0xe0, 1, 2, 3, 4]);
const REPEATS = 5;

let host: TestHost;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
let webhookUrl = "";
let nextMessageId = 100;
let runId = "";

async function telegramApi(call: PlatformCall): Promise<FakeReply> {
  const m = /^\/(file\/)?bot([^/]+)\/(.+)$/.exec(call.path);
  if (!m || m[2] !== BOT_TOKEN) return { status: 401, json: { ok: false, error_code: 401, description: "Unauthorized" } };
  if (m[1]) return { bytes: PHOTO, headers: { "content-type": "image/jpeg" } };
  if (m[3] === "getFile") return { json: { ok: true, result: { file_id: call.body.file_id, file_path: `photos/${call.body.file_id}.jpg` } } };
  return { json: { ok: true, result: { message_id: ++nextMessageId } } };
}

beforeAll(async () => {
  fake = await startFakePlatform(telegramApi);
  runner = await startAdHocRunner({
    name: "trailing-repeats",
    async onRun({ body }, res) {
      const ctx = body.context;
      runId = ctx.run_id;
      const w = resultWriter(res, ctx.run_id);
      w.send("message.completed", { message: { role: "assistant", content: "here is your picture" } });
      // The same (readable: this conversation's input) artifact, announced after the last message several times.
      for (let i = 0; i < REPEATS; i++) w.send("artifact.created", { artifact_type: "image", artifact_id: ctx.input.attachments[0].artifact_id });
      w.send("run.completed", { finish_reason: "stop" });
      res.end();
    },
  });
  host = await startTestHost();
  const created = await host.admin("POST", "/v1/admin/bots", { platform: "telegram", name: "tg", api_base_url: fake.url, credentials: { bot_token: BOT_TOKEN, secret_token: SECRET_TOKEN } });
  expect(created.status).toBe(201);
  webhookUrl = created.body.webhook_url;
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "trailing-repeats", scope: { type: "bot", id: created.body.bot_id }, eventTypes: ["message.received"] });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await fake?.close();
});

describe("a file announced several times after the last message", () => {
  it("is kept once in the transcript and posted once in the chat", async () => {
    const body = { update_id: 9001, message: { message_id: 9001, date: Math.floor(Date.now() / 1000), chat: { id: -801, type: "group" }, from: { id: 42, is_bot: false, first_name: "A" }, caption: "pic", photo: [{ file_id: "p1", width: 80, height: 80 }] } };
    const res = await fetch(webhookUrl, { method: "POST", headers: { "content-type": "application/json", "x-telegram-bot-api-secret-token": SECRET_TOKEN }, body: JSON.stringify(body) });
    expect(res.status).toBe(200);
    await waitFor(() => runId !== "", 15_000, "the run");
    expect((await host.waitForRun(runId)).status).toBe("completed");
    const items = await host.query<{ item_type: string; artifact_refs_json: string }>("SELECT item_type, artifact_refs_json FROM transcript WHERE run_id = ? AND role = 'assistant' ORDER BY seq", [runId]);
    const refs = items.flatMap((i) => JSON.parse(i.artifact_refs_json));
    await waitFor(() => fake.callsTo(/\/sendPhoto$/).length > 0, 15_000, "the photo");
    // Any repeat would be posted right after the first: a short wait shows none comes.
    await new Promise((r) => setTimeout(r, 1500));
    const photos = fake.callsTo(/\/sendPhoto$/).length + fake.callsTo(/\/sendDocument$/).length;
    expect({ transcriptRefs: refs.length, filePosts: photos }).toEqual({ transcriptRefs: 1, filePosts: 1 });
  });
});
