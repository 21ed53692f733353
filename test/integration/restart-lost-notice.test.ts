import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT } from "../../local/build";
import { startHost } from "../../local/host";
import { adminCall, bindRunner } from "../../local/setup";
import { ADMIN_TOKEN, waitForRunOn } from "../support/host";
import { deferred } from "../support/host-api";
import { sayOnTelegram, startFakePlatform, waitFor, type PlatformCall } from "../support/fake-platform";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * README: a chat reply still on its way (a rate limit being waited out) when the instance dies is sent by the next
 * instance. The failure notice of a run lost with a restart is such a reply: if the host restarts again while that
 * notice waits out the platform's rate limit, the chat user must still hear that the run failed.
 */
const botToken = "123456:TEST-telegram-bot-token-lostnote";
const secretToken = "tg-secret-token-lostnote-0123";
let dataDir: string;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
let fake: Awaited<ReturnType<typeof startFakePlatform>>;
const never = deferred();
const started: string[] = [];
const throttleOnce = new Map<string, number>();

const start = () => startHost({ adminToken: ADMIN_TOKEN, dataDir, scriptPath: join(ROOT, "dist/test/worker.js"), vars: { RUN_WATCHDOG_INTERVAL_MS: "1000" } });

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "agent-host-restart-lostnote-"));
  let nextId = 900;
  fake = await startFakePlatform((call: PlatformCall) => {
    const m = /^\/bot([^/]+)\/(.+)$/.exec(call.path);
    if (!m || m[1] !== botToken) return { status: 401, json: { ok: false, error_code: 401, description: "Unauthorized" } };
    const chat = String(call.body?.chat_id);
    const wait = throttleOnce.get(chat);
    if (m[2] === "sendMessage" && wait !== undefined) {
      throttleOnce.delete(chat);
      return { status: 429, json: { ok: false, error_code: 429, description: `Too Many Requests: retry after ${wait}`, parameters: { retry_after: wait } } };
    }
    if (m[2] === "sendMessage") return { json: { ok: true, result: { message_id: ++nextId, chat: { id: Number(chat) }, text: call.body.text } } };
    if (m[2] === "editMessageText") return { json: { ok: true, result: { message_id: call.body.message_id, text: call.body.text } } };
    return { status: 404, json: { ok: false, error_code: 404, description: "Not Found" } };
  });
  runner = await startAdHocRunner({
    name: "lostnote",
    async onRun({ body }, res) {
      const ctx = body.context;
      started.push(ctx.input.text);
      const w = resultWriter(res, ctx.run_id);
      if (ctx.input.text.startsWith("hold")) await never.promise;
      w.reply(`done: ${ctx.input.text}`);
    },
  });
});
afterAll(async () => {
  never.resolve();
  await runner?.close();
  await fake?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

const sentTo = (chat: string) => fake.callsTo(/sendMessage$/).filter((c) => String(c.body?.chat_id) === chat && c.reply?.status === undefined).map((c) => c.body.text as string);

describe("the failure notice of a run lost with a restart", () => {
  it("still reaches the chat when the host restarts again while the notice waits out a rate limit", async () => {
    let host = await start();
    try {
      const created = await adminCall<{ bot_id: string; webhook_url: string }>(host, "POST", "/v1/admin/bots", { platform: "telegram", name: "tg", api_base_url: fake.url, credentials: { bot_token: botToken, secret_token: secretToken } });
      expect(created.status).toBe(201);
      const webhook = () => `${host.url}${new URL(created.body.webhook_url).pathname}`;
      await bindRunner(host, { baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "lostnote", scope: { type: "bot", id: created.body.bot_id } });
      expect((await sayOnTelegram(webhook(), secretToken, "5561", "hold on")).status).toBe(200);
      await waitFor(() => started.includes("hold on"), 10_000, "the held run");
      const runId = (await host.query<{ run_id: string }>("SELECT run_id FROM event_log WHERE source = 'telegram' AND input_summary LIKE '%hold on%'"))[0].run_id;
      // First restart: the run is lost; its notice's first send is refused with a 429 asking to wait 4 s.
      throttleOnce.set("5561", 4);
      await host.dispose();
      host = await start();
      expect(await waitForRunOn(host, runId, 15_000)).toMatchObject({ status: "failed", error: { code: "host.session_lost" } });
      await waitFor(() => fake.callsTo(/sendMessage$/).some((c) => String(c.body?.chat_id) === "5561" && c.reply?.status === 429), 10_000, "the notice's first attempt");
      // Second restart while the notice waits.
      await host.dispose();
      host = await start();
      await waitFor(() => sentTo("5561").length > 0, 15_000, "the notice after the second restart").catch(() => undefined);
      expect(sentTo("5561")).toEqual(["Sorry, I could not answer this time."]);
    } finally {
      await host.dispose();
    }
  }, 60_000);
});
