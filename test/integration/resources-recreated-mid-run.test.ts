import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { listenLoopback, readBody, sendJson } from "../support/http-server";
import { startTestHost, type TestHost } from "../support/host";
import { startScriptedRunner } from "../support/scripted-runner";

/**
 * PROTOCOL §4/§8: a run may use only what its frozen snapshot lists. A run's snapshot lists knowledge base "docs"
 * (the product docs). While it runs, the operator revokes the grant, deletes "docs" and registers another knowledge
 * base under the same id (HR records) that no agent grants. The run's call on "docs" must not reach the new one:
 * it was never granted to anyone; the resource the run was granted is gone (as for a deleted one: not_found).
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
let kb: Awaited<ReturnType<typeof listenLoopback>>;
const hits: string[] = [];

beforeAll(async () => {
  kb = await listenLoopback(async (req, res) => {
    await readBody(req);
    hits.push(req.url ?? "");
    if (req.url?.startsWith("/tool")) return sendJson(res, 200, { from: req.url });
    sendJson(res, 200, { entries: [{ content: req.url === "/hr" ? "salary of every employee" : "how to install", score: 1 }] });
  });
  runner = await startScriptedRunner({ name: "recreated-kb", runners: [{ name: "default", label: { en_US: "r" }, permissions: { knowledge_bases: ["list", "retrieve"], tools: ["call"] } }] });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/knowledge-bases", { kb_id: "docs", name: "Docs", description: "product docs", endpoint: `${kb.url}/docs` })).status).toBe(201);
  const tool = await host.admin("POST", "/v1/admin/tools", { name: "lookup", description: "orders", endpoint: `${kb.url}/tool-orders`, parameters: { type: "object" } });
  expect(tool.status).toBe(201);
  await runner.register(host);
  const agent = await host.admin("POST", "/v1/admin/agents", {
    agent_id: "reader", name: "reader", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "global" },
    resource_policy: { knowledge_bases: ["docs"], tools: ["lookup"] },
  });
  expect(agent.status).toBe(201);
});
afterAll(async () => {
  await host?.dispose();
  await Promise.all([runner?.close(), kb?.close()]);
});

describe("a knowledge base deleted and registered anew under its id during a run", () => {
  it("is not read by the run whose snapshot listed the old one", async () => {
    const arrived = deferred();
    const release = deferred();
    const run = runner.run(host, "recreated-kb", async (api, ctx) => {
      const before = await api("knowledge.retrieve", { kb_id: "docs", query: "q" });
      arrived.resolve();
      await release.promise;
      const after = await api("knowledge.retrieve", { kb_id: "docs", query: "q" });
      return { listed: ctx.resources.knowledge_bases, before: before.body.data?.entries, after: { status: after.status, body: after.body } };
    });
    await arrived.promise;
    // The operator revokes the grant, removes "docs", and registers an unrelated knowledge base under the same id.
    const agent = (await host.admin("GET", "/v1/admin/agents/reader")).body;
    const put = await host.admin("PUT", "/v1/admin/agents/reader", { ...agent, resource_policy: { ...agent.resource_policy, knowledge_bases: [] } });
    expect(put.status).toBe(200);
    expect((await host.admin("DELETE", "/v1/admin/knowledge-bases/docs")).status).toBe(204);
    expect((await host.admin("POST", "/v1/admin/knowledge-bases", { kb_id: "docs", name: "HR", description: "HR records", endpoint: `${kb.url}/hr` })).status).toBe(201);
    release.resolve();
    const { result } = await run;
    expect(result.listed).toEqual([expect.objectContaining({ kb_id: "docs", name: "Docs", description: "product docs" })]);
    expect(result.before).toEqual([{ content: "how to install", score: 1, metadata: {} }]);
    // The HR endpoint was never granted to any agent: the run must not read it.
    expect(hits).not.toContain("/hr");
    expect(result.after.status).toBe(404);
  });

  it("nor is a tool: the call is refused (404) and never reaches the new endpoint", async () => {
    const arrived = deferred();
    const release = deferred();
    const run = runner.run(host, "recreated-tool", async (api) => {
      const before = await api("tool.call", { tool_name: "lookup", parameters: {} });
      arrived.resolve();
      await release.promise;
      const after = await api("tool.call", { tool_name: "lookup", parameters: {} });
      return { before: before.body.data?.result, after: { status: after.status, code: after.body.error?.code } };
    });
    await arrived.promise;
    const agent = (await host.admin("GET", "/v1/admin/agents/reader")).body;
    expect((await host.admin("PUT", "/v1/admin/agents/reader", { ...agent, resource_policy: { ...agent.resource_policy, tools: [] } })).status).toBe(200);
    expect((await host.admin("DELETE", "/v1/admin/tools/lookup")).status).toBe(204);
    expect((await host.admin("POST", "/v1/admin/tools", { name: "lookup", description: "payroll", endpoint: `${kb.url}/tool-payroll`, parameters: { type: "object" } })).status).toBe(201);
    release.resolve();
    const { result } = await run;
    expect(result.before).toEqual({ from: "/tool-orders" });
    expect(hits).not.toContain("/tool-payroll");
    expect(result.after).toEqual({ status: 404, code: "not_found" });
  });
});
