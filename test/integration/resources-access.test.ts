import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ECHO_KEY } from "../support/fake-provider";
import { startResourcesFixture, type ResourcesFixture } from "../support/resources-fixture";

/** Who may use host-held resources (PROTOCOL §4, §8), and credentials: never shown to runners, sealed at rest. */

let world: ResourcesFixture;
beforeAll(async () => {
  world = await startResourcesFixture();
});
afterAll(async () => {
  await world?.close();
});

describe("authorisation", () => {
  it("refuses an ungranted model, tool or knowledge base with 403 and audits each refusal", async () => {
    const providerBefore = world.provider.calls.length;
    const toolBefore = world.tools.calls.length;
    const retrievalBefore = world.retrieval.calls.length;
    const { result, runId } = await world.inRun("ungranted", async ({ api }) => ({
      model: await api("model.invoke", { model_id: "private", messages: [{ role: "user", content: "x" }] }),
      rerankWithLlm: await api("model.rerank", { model_id: "chat", query: "q", documents: ["d"] }),
      tool: await api("tool.call", { tool_name: "ungranted", parameters: { city: "Oslo" } }),
      toolDetail: await api("tool.detail", { tool_name: "nope" }),
      kb: await api("knowledge.retrieve", { kb_id: "private-kb", query: "q" }),
    }));
    for (const key of ["model", "rerankWithLlm", "tool", "toolDetail", "kb"]) {
      expect([key, result[key].status, result[key].body.error.code]).toEqual([key, 403, "unauthorized"]);
    }
    expect(world.provider.calls.length).toBe(providerBefore);
    expect(world.tools.calls.length).toBe(toolBefore);
    expect(world.retrieval.calls.length).toBe(retrievalBefore);

    const { result: denials } = await world.inRun("ungranted", async ({ api }) => {
      const events = await api("event.page", { limit: 100 });
      // event.page is newest first.
      return events.body.data.items.filter((e: any) => e.event_type === "host_api.denied" && e.metadata.run_id === runId).map((e: any) => e.metadata).reverse();
    });
    expect(denials.map((d: any) => [d.action, d.resource.resource_id, d.resource.operation])).toEqual([
      ["model.invoke", "private", "invoke"],
      ["model.rerank", "chat", "rerank"],
      ["tool.call", "ungranted", "call"],
      ["tool.detail", "nope", "detail"],
      ["knowledge.retrieve", "private-kb", "retrieve"],
    ]);
    for (const d of denials) expect(d).toMatchObject({ run_id: runId, runner_id: world.runner.runnerId() });
  });

  it("grants each operation separately: a tool granted for detail cannot be called", async () => {
    const before = world.tools.calls.length;
    const { result } = await world.inRun("narrow", async ({ api }) => ({
      detail: await api("tool.detail", { tool_name: "weather" }),
      call: await api("tool.call", { tool_name: "weather", parameters: { city: "Oslo" } }),
    }));
    expect(result.detail.status).toBe(200);
    expect([result.call.status, result.call.body.error.code]).toEqual([403, "unauthorized"]);
    expect(result.call.body.error.message).toBe('tool "weather" is not granted to this run for call');
    expect(world.tools.calls.length).toBe(before);
  });
});

describe("secrets", () => {
  it("never appear in what runners receive, in admin answers, in the ledger, in EventLog or in the Worker's logs", async () => {
    // Exercise every path in this test too, failures included, so it stands on its own.
    const { runId } = await world.inRun("secrets", async ({ api, raw }) => {
      await api("model.invoke", { model_id: "flaky", messages: [{ role: "user", content: "x" }] });
      // A provider quoting the key it was sent, answered and streamed.
      const echoed = await api("model.invoke", { model_id: "chat", messages: [{ role: "user", content: ECHO_KEY }] });
      if (echoed.body.data.message.content !== "you used Bearer [redacted]") throw new Error(`not scrubbed as expected: ${JSON.stringify(echoed.body)}`);
      for await (const line of world.ndjson(await raw("model.stream", { model_id: "chat", messages: [{ role: "user", content: ECHO_KEY }] }))) void line;
      for await (const line of world.ndjson(await raw("model.stream", { model_id: "chat", messages: [{ role: "user", content: "y" }] }))) void line;
      await api("model.rerank", { model_id: "reranker", query: "q", documents: ["a"] });
      await api("tool.call", { tool_name: "weather", parameters: { city: "Rome" } });
      await api("tool.call", { tool_name: "echo_auth", parameters: {} });
      await api("tool.call", { tool_name: "calc.add", parameters: { a: 1, b: 1 } });
      await api("knowledge.retrieve", { kb_id: "docs", query: "z" });
      await api("model.invoke", { model_id: "private", messages: [{ role: "user", content: "x" }] });
      return (await api("event.page", { limit: 100 })).body;
    });
    const { runId: narrowRunId } = await world.inRun("narrow", async ({ api }) => api("model.invoke", { model_id: "flaky", messages: [{ role: "user", content: "x" }] }));

    const admin: unknown[] = [];
    for (const path of ["/v1/admin/models", "/v1/admin/tools", "/v1/admin/mcp-servers", "/v1/admin/knowledge-bases", "/v1/admin/agents", "/v1/admin/models/chat", "/v1/admin/mcp-servers/calc"]) {
      admin.push((await world.host.admin("GET", path)).body);
    }
    const runs = (await world.host.admin("GET", "/v1/runs?limit=200")).body.items as { run_id: string }[];
    expect(runs.map((r) => r.run_id)).toEqual(expect.arrayContaining([runId, narrowRunId]));
    const ledgers = await Promise.all(runs.map((r) => world.ledger(r.run_id)));

    const corpus = [...world.seenByRunners, JSON.stringify(admin), JSON.stringify(ledgers), world.host.logs()].join("\n");
    expect(world.seenByRunners.length).toBeGreaterThan(10);
    for (const [name, value] of Object.entries(world.SECRETS)) {
      expect(corpus.includes(value), `secret ${name} leaked`).toBe(false);
      // As it would appear inside serialised JSON.
      expect(corpus.includes(JSON.stringify(value).slice(1, -1)), `secret ${name} leaked (escaped)`).toBe(false);
    }
    // The capture works: upstream failures are logged (scrubbed) for operators.
    expect(world.host.logs()).toContain("model flaky (invoke) failed");
    // The admin listings mask rather than omit, so an operator sees a key is set.
    expect((admin[0] as any).items[0].api_key).toBe("********");
    expect((admin[6] as any).headers).toEqual({ authorization: "********" });
  });
});

describe("credentials at rest", () => {
  it("are sealed in libSQL, and a value stored before the host had a key still works", async () => {
    const rows = await Promise.all(
      ["SELECT api_key AS v FROM model", "SELECT headers_json AS v FROM tool", "SELECT headers_json AS v FROM mcp_server", "SELECT api_key AS v FROM knowledge_base"].map((q) => world.host.query<{ v: string | null }>(q)),
    );
    const stored = rows.flat().map((r) => r.v ?? "").join("\n");
    expect(stored).toContain("sealed:v3:");
    // Credentials inside endpoint URLs are stored as given (and masked in views): only keys and headers are sealed.
    const urlBorne = new Set(["urlKey", "mcpPath", "mcpQuery"]);
    for (const [name, value] of Object.entries(world.SECRETS)) {
      if (urlBorne.has(name)) continue;
      expect(stored.includes(value), `secret ${name} stored in the clear`).toBe(false);
      expect(stored.includes(JSON.stringify(value).slice(1, -1)), `secret ${name} stored in the clear (escaped)`).toBe(false);
    }

    // A row written before SECRETS_KEY was set holds its key as given: it is used as it is.
    await world.host.query("UPDATE model SET api_key = ? WHERE model_id = 'reranker'", [world.SECRETS.main]);
    const { result } = await world.inRun("plain-at-rest", async ({ api }) => (await api("model.rerank", { model_id: "reranker", query: "q", documents: ["a", "b"] })).status);
    expect(result).toBe(200);
  });
});
