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
      runnerManifest("wide", { history: ["page", "search"], events: ["get", "page"], storage: ["plugin"], models: ["invoke"] }),
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
