import { createHmac } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sayOnTelegram, startFakePlatform, startChatRunner, waitFor, type PlatformCall } from "../support/fake-platform";
import { startFakeProvider } from "../support/fake-provider";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { callHostApi } from "../support/host-api";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * A sealed credential opens only for where its row sends it: someone who can
 * write the database but not read SECRETS_KEY, and points a row's endpoint at
 * a server of theirs, gets the credential refused rather than sent there. An
 * operator who moves the endpoint through the admin API keeps it working.
 */
const MODEL_KEY = "sk-destination-model-41c7";
const RUNNER_SECRET = "destination-runner-secret-9d0e";
const BOT_TOKEN = "777001:TEST-destination-bot-token-xyz";
const SECRET_TOKEN = "tg-destination-secret-0123456789";

let host: TestHost;
let provider: Awaited<ReturnType<typeof startFakeProvider>>;
/** Someone else's server, taking any call. */
let attacker: Awaited<ReturnType<typeof startFakeProvider>>;

beforeAll(async () => {
  host = await startTestHost();
  provider = await startFakeProvider({ keys: { "gpt-dest": MODEL_KEY } });
  attacker = await startFakeProvider({ keys: {} });
});
afterAll(async () => {
  await host?.dispose();
  await Promise.all([provider?.close(), attacker?.close()]);
});

const signedWith = (call: { headers: Record<string, unknown>; raw: string }, secret: string) =>
  call.headers["x-agent-signature"] === `v1=${createHmac("sha256", secret).update(`${call.headers["x-agent-timestamp"]}.${call.raw}`).digest("hex")}`;

describe("credentials bound to their destination", () => {
  it("a model whose base_url is changed in the database no longer opens its key, and nothing reaches the new address", async () => {
    const runner = await startAdHocRunner({
      name: "dest-model",
      runners: [{ name: "default", label: { en_US: "dest-model" }, permissions: { models: ["invoke"] } }],
      async onRun({ body }, res) {
        const ctx = body.context;
        const answer = await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "model.invoke", { model_id: "dest", messages: [{ role: "user", content: "hi" }] });
        resultWriter(res, ctx.run_id).reply(JSON.stringify({ status: answer.status, error: answer.body.error ?? null }));
      },
    });
    try {
      const model = { model_id: "dest", name: "dest", kind: "llm", base_url: provider.baseUrl, api_key: MODEL_KEY, model: "gpt-dest" };
      expect((await host.admin("POST", "/v1/admin/models", model)).status).toBe(201);
      await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "dest-model", scope: { type: "conversation", id: "dest-model" } });
      expect((await host.admin("PUT", "/v1/admin/agents/dest-model", { name: "dest-model", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: "dest-model" }, resource_policy: { models: ["dest"] } })).status).toBe(200);
      const invoke = async () => {
        const posted = await host.admin<{ run_id: string }>("POST", "/v1/events", messageEvent("dest-model", "invoke"));
        return JSON.parse(String((await host.waitForRun(posted.body.run_id)).message?.content));
      };
      expect(await invoke()).toEqual({ status: 200, error: null });

      await host.query("UPDATE model SET base_url = ? WHERE model_id = 'dest'", [attacker.baseUrl]);
      expect(await invoke()).toMatchObject({ status: 500, error: { message: expect.stringMatching(/cannot open this resource's stored credential.*endpoint was changed/) } });
      expect(attacker.calls).toEqual([]);

      // Put back where it was sealed for, it opens again: bound, not destroyed.
      await host.query("UPDATE model SET base_url = ? WHERE model_id = 'dest'", [provider.baseUrl]);
      expect(await invoke()).toEqual({ status: 200, error: null });
      expect(provider.calls.at(-1)?.authorization).toBe(`Bearer ${MODEL_KEY}`);
    } finally {
      await runner.close();
    }
  });

  it("a runner service moved with PUT signs with its secret at the new address; one moved in the database is not called", async () => {
    const replying = { name: "dest-signed", onRun: ({ body }: { body: any }, res: Parameters<Parameters<typeof startAdHocRunner>[0]["onRun"]>[1]) => resultWriter(res, body.context.run_id).reply("ok") };
    const [before, after] = await Promise.all([startAdHocRunner(replying), startAdHocRunner(replying)]);
    try {
      await host.bind({ baseUrl: before.url, secret: RUNNER_SECRET, runnerId: before.runnerId(), agentId: "dest-signed", scope: { type: "conversation", id: "dest-signed" } });
      const run = async () => {
        const posted = await host.admin<{ run_id: string }>("POST", "/v1/events", messageEvent("dest-signed", "hello"));
        return host.waitForRun(posted.body.run_id);
      };
      expect((await run()).status).toBe("completed");
      expect(signedWith(before.calls[0], RUNNER_SECRET)).toBe(true);

      const services = await host.admin<{ items: { service_id: string; base_url: string }[] }>("GET", "/v1/admin/runner-services");
      const serviceId = services.body.items.find((s) => s.base_url === before.url)!.service_id;
      expect((await host.admin("PUT", `/v1/admin/runner-services/${serviceId}`, { base_url: after.url })).status).toBe(200);
      expect((await run()).status).toBe("completed");
      expect(after.calls).toHaveLength(1);
      expect(signedWith(after.calls[0], RUNNER_SECRET)).toBe(true);

      await host.query("UPDATE runner_service SET base_url = ? WHERE service_id = ?", [before.url, serviceId]);
      const refused = await run();
      expect(refused).toMatchObject({ status: "failed", error: { code: "host.internal_error", message: expect.stringMatching(/secret cannot be used/) } });
      expect(before.calls).toHaveLength(1);
    } finally {
      await Promise.all([before.close(), after.close()]);
    }
  });

  it("a bot moved with PUT delivers with its credentials at the new API origin; one moved in the database is refused", async () => {
    const telegram = (call: PlatformCall) =>
      call.path === `/bot${BOT_TOKEN}/sendMessage` ? { json: { ok: true, result: { message_id: 1, chat: { id: 5 }, text: call.body?.text } } } : { status: 404, json: { ok: false, error_code: 404, description: "Not Found" } };
    const [first, moved, runner] = await Promise.all([startFakePlatform(telegram), startFakePlatform(telegram), startChatRunner("dest-bot")]);
    try {
      const created = await host.admin<{ bot_id: string; webhook_url: string }>("POST", "/v1/admin/bots", { platform: "telegram", api_base_url: first.url, credentials: { bot_token: BOT_TOKEN, secret_token: SECRET_TOKEN } });
      expect(created.status).toBe(201);
      const botId = created.body.bot_id;
      await host.bind({ baseUrl: runner.url, runnerId: runner.runnerId(), agentId: "dest-bot", scope: { type: "bot", id: botId } });
      const say = (text: string) => sayOnTelegram(created.body.webhook_url, SECRET_TOKEN, "5", text);
      const delivered = (fake: typeof first, text: string) => waitFor(() => fake.calls.find((c) => c.body?.text === `echo: ${text}`), 15_000, `the echo of "${text}" delivered`);

      expect((await say("before the move")).status).toBe(200);
      await delivered(first, "before the move");

      expect((await host.admin("PUT", `/v1/admin/bots/${botId}`, { api_base_url: moved.url })).status).toBe(200);
      expect((await say("after the move")).status).toBe(200);
      await delivered(moved, "after the move");

      await host.query("UPDATE bot SET api_base_url = ? WHERE bot_id = ?", [first.url, botId]);
      const calls = first.calls.length;
      const refused = await say("moved in the database");
      expect(refused.status).toBe(500);
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("secrets_unavailable");
      expect(first.calls.length).toBe(calls);
    } finally {
      await Promise.all([first.close(), moved.close(), runner.close()]);
    }
  });
});
