import { createHmac } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { HostOptions, LocalHost } from "../../local/host";
import { adminCall } from "../../local/setup";
import { startFakeProvider } from "../support/fake-provider";
import { messageEvent, namedLogLines, startHostOn, type RunView } from "../support/host";
import { callHostApi } from "../support/host-api";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * Credentials at rest across key changes, on one data folder: values stored
 * before there was a key, a key set later, a rotation (SECRETS_KEY_PREVIOUS)
 * and `POST /v1/admin/secrets/reseal`; a wrong key fails runs instead of
 * sending anything unsigned.
 */
const KEY_A = Buffer.alloc(32, 0xa).toString("base64");
const KEY_B = Buffer.alloc(32, 0xb).toString("base64");
const RUNNER_SECRET = "rotation-runner-secret-5c1d";
const MODEL_KEY = "sk-rotation-model-8e2f";
/** A runner_config field the rotation runner declares secret, beside a plain one. */
const AGENT_KEY = "agent-config-key-77a1";
const CONFIG_SCHEMA = [
  { name: "api_key", type: "secret", label: { en_US: "Key" } },
  { name: "region", type: "string", label: { en_US: "Region" } },
];

let dataDir: string;
let provider: Awaited<ReturnType<typeof startFakeProvider>>;
let runner: Awaited<ReturnType<typeof startAdHocRunner>>;
/** A runner service without a secret of its own, so its runs reach the model whatever the key. */
let openRunner: Awaited<ReturnType<typeof startAdHocRunner>>;
let botId = "";

async function withHost<T>(vars: Record<string, string>, use: (host: LocalHost) => Promise<T>, dir = dataDir, more: Partial<HostOptions> = {}): Promise<T> {
  const host = await startHostOn(dir, vars, more);
  try {
    return await use(host);
  } finally {
    await host.dispose();
  }
}

async function finished(host: LocalHost, runId: string): Promise<RunView> {
  for (const end = Date.now() + 10_000; ; await new Promise((r) => setTimeout(r, 25))) {
    const res = await adminCall<RunView>(host, "GET", `/v1/runs/${runId}`);
    if (!["created", "running"].includes(res.body.status)) return res.body;
    if (Date.now() > end) throw new Error(`run ${runId} did not end`);
  }
}

/** One run that invokes the model: its status, its reply, and whether the runner saw a request signed with the shared secret. */
async function useCredentials(host: LocalHost, conversation: string) {
  const calls = runner.calls.length;
  const posted = await adminCall<{ run_id: string }>(host, "POST", "/v1/events", messageEvent(conversation, "invoke"));
  const run = await finished(host, posted.body.run_id);
  const call = runner.calls[calls];
  const signed = call ? call.headers["x-agent-signature"] === `v1=${createHmac("sha256", RUNNER_SECRET).update(`${call.headers["x-agent-timestamp"]}.${call.raw}`).digest("hex")}` : null;
  return { status: run.status, reply: run.message?.content, signed, error: run.error, config: call?.body.context.config };
}

const reseal = (host: LocalHost) => adminCall<{ resealed: Record<string, number>; failed: Record<string, number> }>(host, "POST", "/v1/admin/secrets/reseal");
const stored = async (host: LocalHost) => ({
  runner: (await host.query<{ v: string }>("SELECT secret AS v FROM runner_service"))[0].v,
  model: (await host.query<{ v: string }>("SELECT api_key AS v FROM model"))[0].v,
  agentConfig: JSON.parse((await host.query<{ v: string }>("SELECT runner_config_json AS v FROM agent WHERE agent_id = 'rotation'"))[0].v),
});
const NOTHING = { runner_services: 0, bots: 0, models: 0, knowledge_bases: 0, tools: 0, mcp_servers: 0, agents: 0 };
const CONFIG = { api_key: AGENT_KEY, region: "eu" };

/** A runner whose every run invokes model `modelId` through the Host API and replies with what `describe` makes of the answer. */
const modelRunner = (name: string, describe: (answer: Awaited<ReturnType<typeof callHostApi>>) => string, modelId = "chat", configSchema?: unknown[]) =>
  startAdHocRunner({
    name,
    runners: [{ name: "default", label: { en_US: name }, permissions: { models: ["invoke"] }, ...(configSchema && { config_schema: configSchema }) }],
    async onRun({ body }, res) {
      const ctx = body.context;
      const answer = await callHostApi(ctx.runtime.api.base_url, ctx.run_id, ctx.runtime.api.token, "model.invoke", { model_id: modelId, messages: [{ role: "user", content: "hi" }] });
      resultWriter(res, ctx.run_id).reply(describe(answer));
    },
  });

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "agent-host-secrets-"));
  provider = await startFakeProvider({ keys: { "gpt-main": MODEL_KEY } });
  runner = await modelRunner("rotation", (answer) => String(answer.status), "chat", CONFIG_SCHEMA);
  openRunner = await modelRunner("rotation-open", (answer) => JSON.stringify({ status: answer.status, error: answer.body.error ?? null }));
});
afterAll(async () => {
  await Promise.all([runner?.close(), openRunner?.close(), provider?.close()]);
  rmSync(dataDir, { recursive: true, force: true });
});

describe("credentials at rest across key changes", () => {
  it("keeps every credential usable from no key, to a key, through a rotation, and refuses a wrong key", async () => {
    // No key: stored as given; nothing to reseal under.
    await withHost({}, async (host) => {
      expect((await reseal(host)).status).toBe(409);
      expect((await adminCall(host, "POST", "/v1/admin/runner-services", { base_url: runner.url, secret: RUNNER_SECRET })).status).toBe(201);
      expect((await adminCall(host, "POST", "/v1/admin/models", { model_id: "chat", name: "chat", kind: "llm", base_url: provider.baseUrl, api_key: MODEL_KEY, model: "gpt-main" })).status).toBe(201);
      const agent = { agent_id: "rotation", name: "rotation", runner_id: runner.runnerId(), runner_config: CONFIG, event_types: ["message.received"], resource_policy: { models: ["chat"] } };
      expect((await adminCall(host, "POST", "/v1/admin/agents", agent)).status).toBe(201);
      expect(await stored(host)).toEqual({ runner: RUNNER_SECRET, model: MODEL_KEY, agentConfig: CONFIG });
      expect((await adminCall(host, "POST", "/v1/admin/runner-services", { base_url: openRunner.url })).status).toBe(201);
      const open = { agent_id: "rotation-open", name: "open", runner_id: openRunner.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: "open" }, resource_policy: { models: ["chat"] } };
      expect((await adminCall(host, "POST", "/v1/admin/agents", open)).status).toBe(201);
      expect(await useCredentials(host, "no-key")).toMatchObject({ status: "completed", reply: "200", signed: true, config: CONFIG });
    });

    // A key set later: the old plain values still work, and reseal seals them (once).
    await withHost({ SECRETS_KEY: KEY_A }, async (host) => {
      expect(await useCredentials(host, "key-a")).toMatchObject({ status: "completed", reply: "200", signed: true, config: CONFIG });
      expect((await reseal(host)).body).toEqual({ resealed: { ...NOTHING, runner_services: 1, models: 1, agents: 1 }, failed: NOTHING });
      expect((await reseal(host)).body).toEqual({ resealed: NOTHING, failed: NOTHING });
      const sealed = await stored(host);
      expect(sealed.runner).toMatch(/^sealed:v3:/);
      expect(sealed.model).toMatch(/^sealed:v3:/);
      // Only the field the runner declares secret is sealed; the rest of the config stays readable.
      expect(sealed.agentConfig).toEqual({ api_key: expect.stringMatching(/^sealed:v3:/), region: "eu" });
      expect(await useCredentials(host, "key-a-sealed")).toMatchObject({ status: "completed", reply: "200", signed: true, config: CONFIG });
    });

    // Rotation: the new key with the old one as previous; reseal moves everything to the new key.
    await withHost({ SECRETS_KEY: KEY_B, SECRETS_KEY_PREVIOUS: KEY_A }, async (host) => {
      expect(await useCredentials(host, "rotating")).toMatchObject({ status: "completed", reply: "200", signed: true, config: CONFIG });
      expect((await reseal(host)).body.resealed).toEqual({ ...NOTHING, runner_services: 1, models: 1, agents: 1 });
    });
    await withHost({ SECRETS_KEY: KEY_B }, async (host) => {
      expect(await useCredentials(host, "key-b")).toMatchObject({ status: "completed", reply: "200", signed: true, config: CONFIG });
      // The agent as GET shows it (its secret masked), sent back: the secret is kept, sealed anew.
      const shown = await adminCall<Record<string, unknown>>(host, "GET", "/v1/admin/agents/rotation");
      expect(shown.body.runner_config).toEqual({ api_key: "********", region: "eu" });
      expect((await adminCall(host, "PUT", "/v1/admin/agents/rotation", shown.body)).status).toBe(200);
      expect((await stored(host)).agentConfig).toEqual({ api_key: expect.stringMatching(/^sealed:v3:/), region: "eu" });
      expect(await useCredentials(host, "key-b-put")).toMatchObject({ status: "completed", config: CONFIG });
      const bot = await adminCall<{ bot_id: string }>(host, "POST", "/v1/admin/bots", { platform: "telegram", credentials: { bot_token: "123:rotation-bot-token", secret_token: "rotation-webhook-secret" } });
      expect(bot.status).toBe(201);
      botId = bot.body.bot_id;
    });

    // A wrong key: the run fails before anything is sent with a credential it cannot open, and reseal reports what it cannot open.
    let logs = "";
    await withHost({ SECRETS_KEY: KEY_A }, async (host) => {
      expect((await reseal(host)).body).toEqual({ resealed: NOTHING, failed: { ...NOTHING, runner_services: 1, models: 1, bots: 1, agents: 1 } });
      const before = runner.calls.length;
      const outcome = await useCredentials(host, "wrong-key");
      expect(outcome.status).toBe("failed");
      expect(outcome.error).toMatchObject({ code: "host.internal_error", message: expect.stringMatching(/cannot be used: .*SECRETS_KEY/) });
      expect(runner.calls.length).toBe(before);

      // A model key it cannot open: the Host API says so (500), without the key and without calling the provider.
      const providerCalls = provider.calls.length;
      const posted = await adminCall<{ run_id: string }>(host, "POST", "/v1/events", messageEvent("open", "invoke"));
      const open = await finished(host, posted.body.run_id);
      expect(JSON.parse(String(open.message?.content))).toMatchObject({ status: 500, error: { code: "runtime_error", message: expect.stringMatching(/cannot open this resource's stored credential.*SECRETS_KEY/) } });
      expect(provider.calls.length).toBe(providerCalls);

      // A bot whose credentials it cannot open: its webhook answers a clear 500, not a generic one.
      const res = await fetch(`${host.url}/v1/webhooks/telegram/${botId}`, { method: "POST", headers: { "x-telegram-bot-api-secret-token": "rotation-webhook-secret" }, body: JSON.stringify({ update_id: 1 }) });
      expect(res.status).toBe(500);
      expect(((await res.json()) as any).error).toMatchObject({ code: "secrets_unavailable", message: expect.stringMatching(/SECRETS_KEY_PREVIOUS/) });
      // The bot's view, which opens nothing, says why its platform gets 500s.
      const view = await adminCall<any>(host, "GET", `/v1/admin/bots/${botId}`);
      expect(view.body.last_webhook_refusal).toEqual({ at: expect.any(String), reason: expect.stringMatching(/^its stored credentials cannot be opened: .*; check SECRETS_KEY and SECRETS_KEY_PREVIOUS$/) });
      // The log has it as every webhook refusal, once: its JSON line, not the error handler's text line too.
      await expect.poll(() => namedLogLines(logs, "webhook.refused")).toEqual([{ log: "webhook.refused", status: 500, platform: "telegram", bot_id: botId, code: "secrets_unavailable", reason: view.body.last_webhook_refusal.reason }]);
      expect(logs).not.toContain(`/v1/webhooks/telegram/${botId}:`);
      for (const secret of [KEY_A, KEY_B, "123:rotation-bot-token", "rotation-webhook-secret"]) expect(logs).not.toContain(secret);
    }, dataDir, { onRuntimeOutput: (text) => (logs += text) });
  }, 120_000); // five hosts started one after another: each start takes seconds on a loaded machine
});

/** A credential as sealed before values were bound to their row: `sealed:v1:`, AES-GCM without associated data. */
async function sealedUnbound(keyBase64: string, plain: string): Promise<string> {
  const key = await crypto.subtle.importKey("raw", Buffer.from(keyBase64, "base64"), "AES-GCM", false, ["encrypt"]);
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const sealed = new Uint8Array(await crypto.subtle.encrypt({ name: "AES-GCM", iv }, key, new TextEncoder().encode(plain)));
  return `sealed:v1:${Buffer.concat([iv, sealed]).toString("base64")}`;
}

describe("credentials bound to their row", () => {
  it("refuses a sealed value copied to another row, still uses one sealed before binding, and reseal binds it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "agent-host-secret-slots-"));
    const elsewhere = await startFakeProvider({ keys: { "gpt-elsewhere": "sk-elsewhere-own" } });
    const json = (answer: Awaited<ReturnType<typeof callHostApi>>) => JSON.stringify({ status: answer.status, error: answer.body.error ?? null });
    const swapRunner = await modelRunner("slot-swap", json, "elsewhere");
    const invoke = async (host: LocalHost, conversation: string) => {
      const posted = await adminCall<{ run_id: string }>(host, "POST", "/v1/events", messageEvent(conversation, "invoke"));
      return JSON.parse(String((await finished(host, posted.body.run_id)).message?.content));
    };
    try {
      await withHost(
        { SECRETS_KEY: KEY_A },
        async (host) => {
          const models = [
            { model_id: "chat", name: "chat", kind: "llm", base_url: provider.baseUrl, api_key: MODEL_KEY, model: "gpt-main" },
            { model_id: "elsewhere", name: "elsewhere", kind: "llm", base_url: elsewhere.baseUrl, api_key: "sk-elsewhere-own", model: "gpt-elsewhere" },
          ];
          for (const model of models) expect((await adminCall(host, "POST", "/v1/admin/models", model)).status).toBe(201);
          for (const r of [openRunner, swapRunner]) expect((await adminCall(host, "POST", "/v1/admin/runner-services", { base_url: r.url })).status).toBe(201);
          const agents = [
            { agent_id: "chat", name: "chat", runner_id: openRunner.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: "chat" }, resource_policy: { models: ["chat"] } },
            { agent_id: "swap", name: "swap", runner_id: swapRunner.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: "swap" }, resource_policy: { models: ["elsewhere"] } },
          ];
          for (const agent of agents) expect((await adminCall(host, "POST", "/v1/admin/agents", agent)).status).toBe(201);
          expect(await invoke(host, "swap")).toEqual({ status: 200, error: null });
          const elsewhereCalls = elsewhere.calls.length;

          // Someone who can write the database but not read the key copies chat's sealed key to the model whose endpoint they chose.
          await host.query("UPDATE model SET api_key = (SELECT api_key FROM model WHERE model_id = 'chat') WHERE model_id = 'elsewhere'");
          expect(await invoke(host, "swap")).toMatchObject({ status: 500, error: { message: expect.stringMatching(/cannot open this resource's stored credential.*another row/) } });
          expect(elsewhere.calls.length).toBe(elsewhereCalls);
          expect(JSON.stringify(elsewhere.calls)).not.toContain(MODEL_KEY);

          // A value sealed before binding (the previous release) still works, and reseal binds it; the copied one stays refused.
          await host.query("UPDATE model SET api_key = ? WHERE model_id = 'chat'", [await sealedUnbound(KEY_A, MODEL_KEY)]);
          expect(await invoke(host, "chat")).toEqual({ status: 200, error: null });
          expect((await reseal(host)).body).toEqual({ resealed: { ...NOTHING, models: 1 }, failed: { ...NOTHING, models: 1 } });
          const [chat] = await host.query<{ api_key: string }>("SELECT api_key FROM model WHERE model_id = 'chat'");
          expect(chat.api_key).toMatch(/^sealed:v3:/);
          expect(await invoke(host, "chat")).toEqual({ status: 200, error: null });
          expect(provider.calls.at(-1)?.authorization).toBe(`Bearer ${MODEL_KEY}`);
        },
        dir,
      );
    } finally {
      await Promise.all([swapRunner.close(), elsewhere.close()]);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** A run of one event: how it ended. */
const runOnce = async (host: LocalHost, conversation: string) => finished(host, (await adminCall<{ run_id: string }>(host, "POST", "/v1/events", messageEvent(conversation, "hi"))).body.run_id);
/**
 * README "Credentials at rest", to rotate: "call reseal until it answers all zeros, then remove SECRETS_KEY_PREVIOUS".
 * A write that keeps a stored secret (a runner service refresh, an agent PUT sent back as GET showed it) landing around
 * the reseal must not put the secret back under the key being rotated out.
 */
describe("a key rotation racing writes that keep a stored secret", () => {
  it("after reseal has answered all zeros, the runner service secret is under the new key", async () => {
    const dir = mkdtempSync(join(tmpdir(), "agent-host-refresh-race-"));
    const signer = await startAdHocRunner({
      name: "refresh-race",
      onRun: ({ body, headers, raw }, res) => {
        const signed = headers["x-agent-signature"] === `v1=${createHmac("sha256", RUNNER_SECRET).update(`${headers["x-agent-timestamp"]}.${raw}`).digest("hex")}`;
        resultWriter(res, body.context.run_id).reply(signed ? "signed" : "unsigned");
      },
    });
    let serviceId = "";
    try {
      await withHost({ SECRETS_KEY: KEY_A }, async (host) => {
        const reg = await adminCall<any>(host, "POST", "/v1/admin/runner-services", { base_url: signer.url, secret: RUNNER_SECRET });
        expect(reg.status).toBe(201);
        serviceId = reg.body.service.service_id;
        expect((await adminCall(host, "POST", "/v1/admin/agents", { agent_id: "rr", name: "rr", runner_id: signer.runnerId(), event_types: ["message.received"] })).status).toBe(201);
        expect(await runOnce(host, "a")).toMatchObject({ status: "completed", message: { content: "signed" } });
      }, dir);

      await withHost({ SECRETS_KEY: KEY_B, SECRETS_KEY_PREVIOUS: KEY_A }, async (host) => {
        // The refresh's write (it carries the manifest) is held a moment, as a slow database would, while the operator reseals.
        host.databaseOutage({ delayMs: 1500, matching: "refresh-race" });
        const refreshing = adminCall(host, "POST", `/v1/admin/runner-services/${serviceId}/refresh`);
        await new Promise((r) => setTimeout(r, 400));
        expect((await reseal(host)).body.resealed.runner_services).toBe(1);
        expect((await reseal(host)).body.resealed.runner_services).toBe(0);
        expect((await refreshing).status).toBe(200);
        // The procedure's "all zeros" was answered before the refresh landed: the operator now removes SECRETS_KEY_PREVIOUS.
      }, dir);

      // SECRETS_KEY_PREVIOUS removed, as the README says to.
      await withHost({ SECRETS_KEY: KEY_B }, async (host) => {
        expect(await runOnce(host, "b")).toMatchObject({ status: "completed", message: { content: "signed" } });
      }, dir);
    } finally {
      await signer.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000); // three hosts started one after another

  it("an agent saved as GET showed it around the reseal keeps its secret under the new key", async () => {
    const dir = mkdtempSync(join(tmpdir(), "agent-host-put-race-"));
    const PUT_RACE_KEY = "agent-put-race-key-4411";
    const echo = await startAdHocRunner({
      name: "put-race",
      runners: [{ name: "default", label: { en_US: "r" }, config_schema: [{ name: "api_key", type: "secret", label: { en_US: "Key" } }] }],
      onRun: ({ body }, res) => resultWriter(res, body.context.run_id).reply(JSON.stringify(body.context.config)),
    });
    try {
      await withHost(
        { SECRETS_KEY: KEY_A },
        async (host) => {
          expect((await adminCall(host, "POST", "/v1/admin/runner-services", { base_url: echo.url })).status).toBe(201);
          expect((await adminCall(host, "POST", "/v1/admin/agents", { agent_id: "pr", name: "pr", runner_id: echo.runnerId(), runner_config: { api_key: PUT_RACE_KEY }, event_types: ["message.received"] })).status).toBe(201);
        },
        dir,
      );
      await withHost(
        { SECRETS_KEY: KEY_B, SECRETS_KEY_PREVIOUS: KEY_A },
        async (host) => {
          // The operator renames the agent, sending back what GET showed (its secret masked); its write is held a moment.
          const shown = (await adminCall<any>(host, "GET", "/v1/admin/agents/pr")).body;
          host.databaseOutage({ delayMs: 1500, matching: "pr-renamed-8c1f" });
          const putting = adminCall(host, "PUT", "/v1/admin/agents/pr", { ...shown, name: "pr-renamed-8c1f" });
          await new Promise((r) => setTimeout(r, 400));
          expect((await reseal(host)).body.resealed.agents).toBe(1);
          expect((await reseal(host)).body.resealed.agents).toBe(0);
          // Written over the row as read only: the reseal changed it meanwhile, so the PUT is a 409 and undoes nothing.
          expect((await putting).status).toBe(409);
        },
        dir,
      );
      await withHost(
        { SECRETS_KEY: KEY_B },
        async (host) => {
          expect(await runOnce(host, "c")).toMatchObject({ status: "completed", message: { content: JSON.stringify({ api_key: PUT_RACE_KEY }) } });
        },
        dir,
      );
    } finally {
      await echo.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000); // three hosts started one after another
});
