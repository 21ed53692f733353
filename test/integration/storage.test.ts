import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { deniedCalls, putAgent, startScriptedRunner } from "../support/scripted-runner";

let host: TestHost;
let alpha: Awaited<ReturnType<typeof startScriptedRunner>>;
let beta: Awaited<ReturnType<typeof startScriptedRunner>>;
const MAX_VALUE = 1024;
const b64 = (text: string) => Buffer.from(text).toString("base64");
const text = (value: string | null) => (value === null ? null : Buffer.from(value, "base64").toString());
const storing = (name: string) => [{ name: "default", label: { en_US: name }, capabilities: {}, permissions: { storage: ["plugin", "workspace"] } }];

beforeAll(async () => {
  [alpha, beta] = await Promise.all([
    startScriptedRunner({ name: "store-alpha", runners: storing("alpha") }),
    startScriptedRunner({ name: "store-beta", runners: storing("beta") }),
  ]);
  host = await startTestHost({ vars: { STORAGE_MAX_VALUE_BYTES: String(MAX_VALUE) } });
  await alpha.register(host);
  await beta.register(host);
  const conversationScope = (id: string) => ({ type: "conversation", id });
  const bothAreas = { allow: { storage: ["plugin", "workspace"] } };
  await putAgent(host, { agent_id: "alpha", runner_id: alpha.runnerId(), scope: conversationScope("st-alpha"), resource_policy: bothAreas });
  await putAgent(host, { agent_id: "beta", runner_id: beta.runnerId(), scope: conversationScope("st-beta"), resource_policy: bothAreas });
  // No storage in the agent's policy: the manifest's request alone grants nothing.
  await putAgent(host, { agent_id: "alpha-default", runner_id: alpha.runnerId(), scope: conversationScope("st-alpha-default") });
  // The agent's policy narrows what the manifest asks for: plugin storage only.
  await putAgent(host, { agent_id: "alpha-plugin-only", runner_id: alpha.runnerId(), scope: conversationScope("st-alpha-plugin"), resource_policy: { allow: { storage: ["plugin"] } } });
  await putAgent(host, { agent_id: "alpha-workspace-only", runner_id: alpha.runnerId(), scope: conversationScope("st-alpha-workspace"), resource_policy: { allow: { storage: ["workspace"] } } });
});
afterAll(async () => {
  await host?.dispose();
  await Promise.all([alpha?.close(), beta?.close()]);
});

describe("storage.* (PROTOCOL §9)", () => {
  it("sets, gets, lists and deletes bytes in the plugin and workspace areas", async () => {
    const { result } = await alpha.run(host, "st-alpha", async (api, ctx) => ({
      resources: ctx.resources.storage,
      available: ctx.context.available_apis.storage,
      set: await api("storage.set", { area: "plugin", key: "basic/cfg/a", value_base64: b64("one") }),
      set_b: await api("storage.set", { area: "plugin", key: "basic/cfg/b", value_base64: b64("two") }),
      set_other: await api("storage.set", { area: "plugin", key: "basic/other", value_base64: b64("three") }),
      overwrite: await api("storage.set", { area: "plugin", key: "basic/cfg/a", value_base64: b64("uno") }),
      get: await api("storage.get", { area: "plugin", key: "basic/cfg/a" }),
      missing: await api("storage.get", { area: "plugin", key: "nope" }),
      page_1: await api("storage.keys", { area: "plugin", prefix: "basic/cfg/", limit: 1 }),
      ws_set: await api("storage.set", { area: "workspace", key: "shared", value_base64: b64("for everyone") }),
      deleted: await api("storage.delete", { area: "plugin", key: "basic/cfg/b" }),
      after_delete: await api("storage.keys", { area: "plugin", prefix: "basic/" }),
    }), { workspace_id: "ws-1" });
    expect(result.resources).toEqual({ plugin_storage: true, workspace_storage: true });
    expect(result.available).toBe(true);
    for (const k of ["set", "set_b", "set_other", "overwrite", "ws_set", "deleted"]) expect(result[k].body, k).toEqual({ ok: true, data: { ok: true } });
    expect(text(result.get.body.data.value_base64)).toBe("uno");
    expect(result.missing.body.data).toEqual({ value_base64: null, found: false });
    expect(result.page_1.body.data).toMatchObject({ keys: ["basic/cfg/a"], has_more: true, next_cursor: expect.any(String) });
    expect(result.after_delete.body.data).toMatchObject({ keys: ["basic/cfg/a", "basic/other"], has_more: false });
  });

  it("pages keys with an opaque cursor and matches prefixes literally", async () => {
    const keys = ["p%1", "p_2", "p🙂3", "pz", "q"];
    const { result } = await alpha.run(host, "st-alpha", async (api) => {
      for (const key of keys) await api("storage.set", { area: "plugin", key: `lit/${key}`, value_base64: b64(key) });
      const first = await api("storage.keys", { area: "plugin", prefix: "lit/p", limit: 2 });
      const second = await api("storage.keys", { area: "plugin", prefix: "lit/p", limit: 2, cursor: first.body.data.next_cursor });
      return { first, second, percent: await api("storage.keys", { area: "plugin", prefix: "lit/p%" }), bad: await api("storage.keys", { area: "plugin", cursor: "%%%" }) };
    });
    expect([...result.first.body.data.keys, ...result.second.body.data.keys]).toEqual(["lit/p%1", "lit/p_2", "lit/pz", "lit/p🙂3"]);
    expect(result.second.body.data.has_more).toBe(false);
    expect(result.percent.body.data.keys).toEqual(["lit/p%1"]);
    expect([result.bad.status, result.bad.body.error.code]).toEqual([400, "invalid_argument"]);
  });

  it("keeps each runner service's plugin area to itself and shares a workspace's area within that workspace only", async () => {
    await alpha.run(host, "st-alpha", async (api) => {
      await api("storage.set", { area: "plugin", key: "secret", value_base64: b64("alpha's") });
      await api("storage.set", { area: "workspace", key: "team", value_base64: b64("ws-2 notes") });
    }, { workspace_id: "ws-2" });
    const seenByBeta = await beta.run(host, "st-beta", async (api) => ({
      plugin: await api("storage.get", { area: "plugin", key: "secret" }),
      workspace: await api("storage.get", { area: "workspace", key: "team" }),
    }), { workspace_id: "ws-2" });
    expect(seenByBeta.result.plugin.body.data.found).toBe(false);
    expect(text(seenByBeta.result.workspace.body.data.value_base64)).toBe("ws-2 notes");
    const otherWorkspace = await beta.run(host, "st-beta", (api) => api("storage.get", { area: "workspace", key: "team" }), { workspace_id: "ws-3" });
    expect(otherWorkspace.result.body.data.found).toBe(false);
  });

  it("refuses a value over STORAGE_MAX_VALUE_BYTES with 413", async () => {
    const { result } = await alpha.run(host, "st-alpha", async (api) => ({
      at_cap: await api("storage.set", { area: "plugin", key: "cap", value_base64: Buffer.alloc(MAX_VALUE).toString("base64") }),
      over: await api("storage.set", { area: "plugin", key: "cap", value_base64: Buffer.alloc(MAX_VALUE + 1).toString("base64") }),
      not_base64: await api("storage.set", { area: "plugin", key: "cap", value_base64: "not base64!" }),
    }));
    expect(result.at_cap.status).toBe(200);
    expect([result.over.status, result.over.body.error.code]).toEqual([413, "payload_too_large"]);
    expect([result.not_base64.status, result.not_base64.body.error.code]).toEqual([400, "invalid_argument"]);
  });

  it("refuses the workspace area when the agent's policy allows only plugin storage, and audits it", async () => {
    const { result, runId } = await alpha.run(host, "st-alpha-plugin", async (api, ctx) => ({
      resources: ctx.resources.storage,
      plugin: await api("storage.keys", { area: "plugin" }),
      workspace: await api("storage.get", { area: "workspace", key: "team" }),
      // §8: the area (scope) is checked before the payload, so a bad value does not hide a denial.
      workspace_bad_value: await api("storage.set", { area: "workspace", key: "team", value_base64: "not base64!" }),
    }), { workspace_id: "ws-2" });
    expect(result.resources).toEqual({ plugin_storage: true, workspace_storage: false });
    expect(result.plugin.status).toBe(200);
    expect([result.workspace.status, result.workspace.body.error.code]).toEqual([403, "unauthorized"]);
    expect(result.workspace.body.error.message).toMatch(/^storage area "workspace" is not granted to this run \(.*resource_policy\.allow\.storage/);
    expect([result.workspace_bad_value.status, result.workspace_bad_value.body.error.code]).toEqual([403, "unauthorized"]);
    expect(await deniedCalls(host, runId)).toEqual([
      expect.objectContaining({ run_id: runId, runner_id: alpha.runnerId(), action: "storage.get", resource: { area: "workspace" }, scope: { conversation_id: "st-alpha-plugin", thread_id: null } }),
      expect.objectContaining({ action: "storage.set", resource: { area: "workspace" } }),
    ]);
  });

  it("grants no storage when the agent's policy does not name it, whatever the manifest asks", async () => {
    const { result, runId } = await alpha.run(host, "st-alpha-default", async (api, ctx) => ({
      resources: ctx.resources.storage,
      available: ctx.context.available_apis.storage,
      plugin: await api("storage.get", { area: "plugin", key: "k" }),
    }), { workspace_id: "ws-2" });
    expect(result.resources).toEqual({ plugin_storage: false, workspace_storage: false });
    expect(result.available).toBe(false);
    expect([result.plugin.status, result.plugin.body.error.code]).toEqual([403, "unauthorized"]);
    expect(result.plugin.body.error.message).toMatch(/^storage area "plugin" is not granted to this run \(.*resource_policy\.allow\.storage/);
    expect(await deniedCalls(host, runId)).toHaveLength(1);
  });

  it("names the event's missing workspace also when that leaves the run no storage at all", async () => {
    const { result } = await alpha.run(host, "st-alpha-workspace", async (api, ctx) => ({
      available: ctx.context.available_apis.storage,
      workspace: await api("storage.get", { area: "workspace", key: "k" }),
      plugin: await api("storage.keys", { area: "plugin" }),
    }));
    expect(result.available).toBe(false);
    expect([result.workspace.status, result.workspace.body.error.message]).toEqual([403, `storage area "workspace" is granted to this agent, but this run's event has no workspace_id`]);
    expect([result.plugin.status, result.plugin.body.error.message]).toEqual([403, expect.stringMatching(/^storage area "plugin" is not granted to this run/)]);
  });

  it("refuses the workspace area for an event without a workspace", async () => {
    const { result } = await alpha.run(host, "st-alpha", async (api, ctx) => ({
      resources: ctx.resources.storage,
      workspace: await api("storage.set", { area: "workspace", key: "k", value_base64: b64("v") }),
    }));
    expect(result.resources.workspace_storage).toBe(false);
    expect(result.workspace.status).toBe(403);
    // The agent does grant the area: the refusal names the event's missing workspace, not the policy.
    expect(result.workspace.body.error.message).toBe(`storage area "workspace" is granted to this agent, but this run's event has no workspace_id`);
  });
  it("a runner service deleted leaves its plugin storage to the cron, which deletes it (a new registration gets a new id: nobody could reach it again)", async () => {
    const gone = await startScriptedRunner({ name: "store-gone", runners: storing("gone") });
    try {
      await gone.register(host);
      await putAgent(host, { agent_id: "gone", runner_id: gone.runnerId(), scope: { type: "conversation", id: "st-gone" }, resource_policy: { allow: { storage: ["plugin", "workspace"] } } });
      const { result } = await gone.run(host, "st-gone", async (api) => [
        (await api("storage.set", { area: "plugin", key: "notes", value_base64: b64("private") })).status,
        (await api("storage.set", { area: "workspace", key: "gone-shared", value_base64: b64("for the workspace") })).status,
      ], { workspace_id: "ws-gone" });
      expect(result).toEqual([200, 200]);
      const serviceId = (await host.admin("GET", "/v1/admin/runners?limit=200")).body.items.find((r: { runner_id: string }) => r.runner_id === gone.runnerId()).service_id;
      expect(await host.query("SELECT key FROM storage WHERE owner_key = ?", [serviceId])).toEqual([{ key: "notes" }]);
      expect((await host.admin("DELETE", "/v1/admin/agents/gone")).status).toBe(200);
      expect((await host.admin("DELETE", `/v1/admin/runner-services/${serviceId}`)).status).toBe(204);
      // Not in the DELETE's batch (an area can hold any amount): the cron deletes it, in bounded batches.
      expect(await host.query("SELECT key FROM storage WHERE owner_key = ?", [serviceId])).toEqual([{ key: "notes" }]);
      await host.triggerScheduled();
      expect(await host.query("SELECT key FROM storage WHERE owner_key = ?", [serviceId])).toEqual([]);
      // The workspace's area is the workspace's, not the service's: it stays.
      expect(await host.query("SELECT key FROM storage WHERE area = 'workspace' AND owner_key = 'ws-gone'")).toEqual([{ key: "gone-shared" }]);
    } finally {
      await gone.close();
    }
  });
});
