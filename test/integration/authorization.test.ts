import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callHostApi, deferred } from "../support/host-api";
import { startTestHost, type TestHost } from "../support/host";
import { deniedCalls, putAgent, runLedger, startScriptedRunner, type RunScript } from "../support/scripted-runner";

/**
 * PROTOCOL §4 and §8: every Host API call is checked against the run's frozen
 * snapshot; every 403 is appended to EventLog as `host_api.denied` naming the
 * run, runner, action, resource and scope, and to the run's ledger. One case per kind of refusal; each
 * uses its own conversation, so none depends on another.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
let conversations = 0;

const runnerManifest = (name: string, permissions: Record<string, string[]>) => ({ name, label: { en_US: name }, capabilities: {}, permissions });

beforeAll(async () => {
  runner = await startScriptedRunner({
    name: "guarded",
    runners: [
      runnerManifest("narrow", { history: ["page"] }),
      runnerManifest("wide", { history: ["page", "search"], events: ["get", "page"], storage: ["plugin"], models: ["invoke"], artifacts: ["read"] }),
      // Steers, and may look artifacts up but not read them: available_apis with flags of either value in every group.
      { name: "steering", label: { en_US: "steering" }, capabilities: { steering: true }, permissions: { events: ["get"], artifacts: ["metadata"], storage: ["plugin", "workspace"] } },
    ],
  });
  host = await startTestHost();
  await runner.register(host);
  const onBot = (agent_id: string, runner_id: string, bot: string, extra: Record<string, unknown> = {}) =>
    putAgent(host, { agent_id, runner_id, scope: { type: "bot", id: bot }, ...extra });
  await onBot("narrow", runner.runnerId("narrow"), "bot-narrow");
  await onBot("wide", runner.runnerId("wide"), "bot-wide", { resource_policy: { allow: { storage: ["plugin"] } } });
  // The agent narrows the manifest: history paging only.
  await onBot("wide-page-only", runner.runnerId("wide"), "bot-page-only", { resource_policy: { allow: { history: ["page"] } } });
  await onBot("steering", runner.runnerId("steering"), "bot-steering", { resource_policy: { allow: { storage: ["plugin"] } }, state_policy: { enable_state: false } });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

/** Run `script` for the agent on `bot`, in a conversation of its own. */
async function runOn(bot: string, script: RunScript) {
  const conversation = `auth-${++conversations}`;
  const { result, runId, eventId } = await runner.run(host, conversation, script, { bot_id: bot });
  return { result, runId, eventId, conversation };
}

/** One call of each API `available_apis` gates, as a runner would make it. */
const GATED_CALLS: [flag: string, action: string, params: (ctx: any) => Record<string, unknown>][] = [
  ["history_page", "history.page", () => ({ limit: 1 })],
  ["history_search", "history.search", () => ({ query: "anything" })],
  ["event_get", "event.get", (ctx) => ({ event_id: ctx.event.event_id })],
  ["event_page", "event.page", () => ({ limit: 1 })],
  ["steering_pull", "steering.pull", () => ({})],
  ["artifact_metadata", "artifact.metadata", () => ({ artifact_id: "art_none" })],
  ["artifact_read", "artifact.read", () => ({ artifact_id: "art_none" })],
  ["state", "state.get", () => ({ scope: "conversation", key: "k" })],
  ["storage", "storage.get", () => ({ area: "plugin", key: "k" })],
];

/** The one 403 the run's call got, and the audit record it left: in EventLog, and in the run's own ledger, before the runner's answer. */
async function expectDeniedOnce(run: { result: any; runId: string; conversation: string }, runnerName: string, action: string, resource: Record<string, unknown>) {
  expect([run.result.status, run.result.body.ok, run.result.body.error.code]).toEqual([403, false, "unauthorized"]);
  const record = {
    run_id: run.runId,
    runner_id: runner.runnerId(runnerName),
    action,
    resource,
    scope: { conversation_id: run.conversation, thread_id: null },
    reason: run.result.body.error.message,
  };
  expect(await deniedCalls(host, run.runId)).toEqual([record]);
  const ledger = await runLedger(host, run.runId);
  expect(ledger.map((e) => [e.type, e.origin])).toEqual([["host_api.denied", "host"], ["message.completed", "runner"], ["run.completed", "runner"]]);
  expect(ledger[0].data).toEqual(record);
}

describe("Host API authorisation", () => {
  it("refuses an API the run's available_apis lack", async () => {
    const run = await runOn("bot-narrow", (api) => api("event.page", {}));
    await expectDeniedOnce(run, "narrow", "event.page", { action: "event.page", api: "event_page" });
  });

  it("refuses an operation the manifest did not ask for (history page only, search called)", async () => {
    const run = await runOn("bot-narrow", async (api, ctx) => {
      expect(ctx.context.available_apis).toMatchObject({ history_page: true, history_search: false });
      return api("history.search", { query: "anything" });
    });
    await expectDeniedOnce(run, "narrow", "history.search", { action: "history.search", api: "history_search" });
  });

  it("refuses an operation the agent's resource_policy.allow narrowed away", async () => {
    const run = await runOn("bot-page-only", async (api, ctx) => {
      expect(ctx.context.available_apis).toMatchObject({ history_page: true, history_search: false, event_get: true });
      return api("history.search", { query: "anything" });
    });
    await expectDeniedOnce(run, "wide", "history.search", { action: "history.search", api: "history_search" });
  });

  it("refuses a resource the snapshot does not hold (a model id never granted)", async () => {
    const run = await runOn("bot-wide", async (api, ctx) => {
      expect(ctx.resources.models).toEqual([]);
      return api("model.invoke", { model_id: "gpt-ungranted", messages: [{ role: "user", content: "hi" }] });
    });
    await expectDeniedOnce(run, "wide", "model.invoke", { action: "model.invoke", group: "models", resource_id: "gpt-ungranted", operation: "invoke" });
  });

  it("refuses a storage area the manifest did not ask for", async () => {
    const run = await runOn("bot-wide", async (api, ctx) => {
      expect(ctx.resources.storage).toEqual({ plugin_storage: true, workspace_storage: false });
      return api("storage.get", { area: "workspace", key: "k" });
    });
    await expectDeniedOnce(run, "wide", "storage.get", { area: "workspace" });
  });

  it("refuses a state scope the policy does not enable", async () => {
    const run = await runOn("bot-wide", async (api, ctx) => {
      expect([ctx.runtime.metadata.state_scopes, ctx.state.runner]).toEqual([["conversation", "actor"], {}]);
      return api("state.get", { scope: "runner", key: "k" });
    });
    await expectDeniedOnce(run, "wide", "state.get", { scope: "runner" });
  });

  it("refuses another conversation's history", async () => {
    const other = await runOn("bot-wide", async () => "other");
    const run = await runOn("bot-wide", (api) => api("history.page", { conversation_id: other.conversation }));
    await expectDeniedOnce(run, "wide", "history.page", { conversation_id: other.conversation });
  });

  it("refuses another conversation's event", async () => {
    const other = await runOn("bot-wide", async () => "other");
    const run = await runOn("bot-wide", async (api) => {
      // Its own event is readable; the other conversation's is not.
      const own = await api("event.get", { event_id: (await api("event.page", { limit: 1 })).body.data.items[0].event_id });
      expect(own.status).toBe(200);
      return api("event.get", { event_id: other.eventId });
    });
    await expectDeniedOnce(run, "wide", "event.get", { event_id: other.eventId });
  });

  it("answers exactly what ctx.context.available_apis says: each API the run is shown as false is a 403, each shown as true is not", async () => {
    const seen: { bot: string; flag: string; available: boolean; status: number }[] = [];
    for (const bot of ["bot-narrow", "bot-wide", "bot-steering"]) {
      const { result } = await runOn(bot, async (api, ctx) => {
        const out = [];
        for (const [flag, action, params] of GATED_CALLS) out.push({ bot, flag, available: ctx.context.available_apis[flag], status: (await api(action, params(ctx))).status });
        return { out, apis: Object.keys(ctx.context.available_apis).sort() };
      });
      // Every flag the run was shown is called: none is left out of this check.
      expect(result.apis).toEqual(GATED_CALLS.map(([flag]) => flag).sort());
      seen.push(...result.out);
    }
    expect(seen.filter((s) => (s.status === 403) === s.available)).toEqual([]);
    // Each flag was seen both ways across the three runs, so each gate was shown to open and to close.
    for (const [flag] of GATED_CALLS) expect(new Set(seen.filter((s) => s.flag === flag).map((s) => s.available))).toEqual(new Set([true, false]));
  });

  it("keeps a run to its frozen snapshot when the agent is edited mid-run: the edit neither widens nor narrows it, and the next run takes it", async () => {
    const agent = { agent_id: "edited", runner_id: runner.runnerId("wide"), scope: { type: "bot", id: "bot-edited" } };
    await putAgent(host, { ...agent, resource_policy: { allow: { history: ["page"] } } });
    const probe: RunScript = async (api, ctx) => ({
      shown: { history_page: ctx.context.available_apis.history_page, history_search: ctx.context.available_apis.history_search, state: ctx.context.available_apis.state },
      page: (await api("history.page", { limit: 1 })).status,
      search: (await api("history.search", { query: "anything" })).status,
      state: (await api("state.set", { scope: "conversation", key: "k", value: 1 })).status,
    });
    const arrived = deferred();
    const release = deferred();
    const held = runOn("bot-edited", async (api, ctx, emit, raw) => {
      arrived.resolve();
      await release.promise;
      return probe(api, ctx, emit, raw);
    });
    await arrived.promise;
    // Mid-run: history search allowed instead of paging, and state turned off.
    await putAgent(host, { ...agent, resource_policy: { allow: { history: ["search"] } }, state_policy: { enable_state: false } });
    release.resolve();
    expect((await held).result).toEqual({ shown: { history_page: true, history_search: false, state: true }, page: 200, search: 403, state: 200 });
    expect((await runOn("bot-edited", probe)).result).toEqual({ shown: { history_page: false, history_search: true, state: false }, page: 403, search: 200, state: 403 });
  });

  it("refuses the token of a run that ended with 401", async () => {
    const ended = await runOn("bot-wide", async (_api, ctx) => ({ token: ctx.runtime.api.token }));
    const res = await callHostApi(host.url, ended.runId, ended.result.token, "host.version");
    expect([res.status, res.body.error?.code]).toEqual([401, "unauthorized"]);
    expect(await deniedCalls(host, ended.runId)).toEqual([]);
  });

  it("refuses a token used against another run's id with 401, both ways", async () => {
    const started = deferred<{ runId: string; token: string }>();
    const release = deferred();
    const held = runner.run(host, `auth-held-${++conversations}`, async (_api, ctx) => {
      started.resolve({ runId: ctx.run_id, token: ctx.runtime.api.token });
      await release.promise;
      return "released";
    }, { bot_id: "bot-wide" });
    const other = await started.promise;
    try {
      const run = await runOn("bot-wide", async (api) => ({
        own_token_other_run: await api("host.version", {}, { runId: other.runId }),
        other_token_own_run: await api("host.version", {}, { token: other.token }),
        own: await api("host.version"),
      }));
      expect(run.result.own_token_other_run.status).toBe(401);
      expect(run.result.other_token_own_run.status).toBe(401);
      expect(run.result.own.status).toBe(200);
      // The held run's own token still works for it.
      expect((await callHostApi(host.url, other.runId, other.token, "host.version")).status).toBe(200);
    } finally {
      release.resolve();
      await held;
    }
  });

  it("refuses a forged run id (well-formed, never issued) with 401, not a server error", async () => {
    const forged = `run_${"ab".repeat(32)}_forged0000`;
    const api = await callHostApi(host.url, forged, "some-token", "host.version");
    expect([api.status, api.body.error?.code]).toEqual([401, "unauthorized"]);
    const upload = await fetch(`${host.url}/v1/runs/${forged}/artifacts`, { method: "PUT", headers: { authorization: "Bearer some-token", "content-length": "1" }, body: "x" });
    expect(upload.status).toBe(401);
    expect((await host.admin("POST", `/v1/runs/${forged}/cancel`)).status).toBe(404);
  });
});
