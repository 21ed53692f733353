import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { startAdHocRunner } from "../support/runner";
import { sayOnTelegram, startFakePlatform, waitFor } from "../support/fake-platform";

/**
 * PROTOCOL §7: `artifact.created {artifact_type, artifact_id?, ..., content_base64?}`. A runner that names its
 * inline artifact (`artifact_id: "chart-1"`, as LangBot's host registers it under that id) and places it in its
 * answer (`{type: "image", artifact_id: "chart-1"}`) must find the answer pointing at the artifact it made.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
let telegram: Awaited<ReturnType<typeof startFakePlatform>>;
let bot: { webhook: string; botId: string };
const BOT_TOKEN = "123456:TEST-telegram-bot-token-inline-id";
const SECRET = "tg-secret-token-inline-id-0123";
const PNG = Buffer.from("89504e470d0a1a0a0000000d49484452", "hex");
const line = (o: unknown) => `${JSON.stringify(o)}\n`;

beforeAll(async () => {
  runner = await startAdHocRunner({
    name: "inline-id",
    async onRun({ body }, res) {
      const run_id = body.context.run_id;
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      res.write(line({ run_id, sequence: 1, type: "artifact.created", data: { artifact_type: "image", artifact_id: "chart-1", mime_type: "image/png", name: "chart.png", content_base64: PNG.toString("base64") } }));
      res.write(line({ run_id, sequence: 2, type: "message.completed", data: { message: { role: "assistant", content: [{ type: "text", text: "Here is the chart:" }, { type: "image", artifact_id: "chart-1" }] } } }));
      res.write(line({ run_id, sequence: 3, type: "run.completed", data: { finish_reason: "stop" } }));
      res.end();
    },
  });
  let nextId = 100;
  telegram = await startFakePlatform((call) => (/\/(sendMessage|sendPhoto|sendDocument|editMessageText)$/.test(call.path) ? { json: { ok: true, result: { message_id: ++nextId } } } : { status: 404, json: { ok: false, description: "Not Found" } }));
  host = await startTestHost();
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "inline-id" });
  const created = await host.admin("POST", "/v1/admin/bots", { platform: "telegram", name: "tg", api_base_url: telegram.url, credentials: { bot_token: BOT_TOKEN, secret_token: SECRET } });
  bot = { webhook: created.body.webhook_url, botId: created.body.bot_id };
  await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "inline-id-tg", scope: { type: "bot", id: bot.botId }, eventTypes: ["message.received"] });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
  await telegram?.close();
});

describe("inline artifact named by the runner", () => {
  it("the answer's image element names the artifact the run stored, not a dangling id", async () => {
    const ev = await host.postEvent(messageEvent("inline-id-1", "chart please"));
    const run = await host.waitForRun(ev.body.run_id!);
    expect(run.status).toBe("completed");
    const page = await host.admin("GET", "/v1/conversations/transcript?conversation_id=inline-id-1&include_artifacts=true");
    const item = page.body.items.find((i: any) => i.role === "assistant");
    const stored = item.artifact_refs.map((r: any) => r.artifact_id);
    expect(stored).toHaveLength(1);
    const named = item.content_json.filter((el: any) => el.type === "image").map((el: any) => el.artifact_id);
    // Every artifact the answer names exists: the one the run stored.
    const rows = await host.query<{ artifact_id: string }>("SELECT artifact_id FROM artifact WHERE artifact_id = ?", [named[0]]);
    expect({ named, exists: rows.length }).toEqual({ named: stored, exists: 1 });
    // The run's final message, as GET /v1/runs shows it, too.
    expect((run.message?.content as any[]).find((el) => el.type === "image").artifact_id).toBe(stored[0]);
  });

  it("in a chat, the image is posted once and no delivery fails for the id the runner gave it", async () => {
    expect((await sayOnTelegram(bot.webhook, SECRET, "-100777", "chart please")).status).toBe(200);
    const [run] = await waitFor(async () => {
      const rows = await host.query<{ run_id: string; status: string }>("SELECT run_id, status FROM run WHERE conversation_id = '-100777'");
      return rows.length > 0 && rows[0].status === "completed" ? rows : undefined;
    });
    const trail = await waitFor(async () => {
      const rows = await host.query<{ event_type: string; data_json: string }>("SELECT event_type, data_json FROM event_log WHERE run_id = ? AND event_type IN ('delivery.succeeded', 'delivery.failed') ORDER BY seq", [run.run_id]);
      return rows.length >= 2 && rows;
    });
    await new Promise((r) => setTimeout(r, 300));
    const failed = (await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE run_id = ? AND event_type = 'delivery.failed'", [run.run_id])).map((r) => JSON.parse(r.data_json));
    expect(failed).toEqual([]);
    expect(telegram.callsTo(/\/sendPhoto$/)).toHaveLength(1);
    expect(trail.length).toBeGreaterThanOrEqual(2);
  });
});
