import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startResourcesFixture, INLINE_LIMIT, TOOL_TIMEOUT_MS, WEATHER_PARAMS, type ResourcesFixture } from "../support/resources-fixture";

/** Host-held tools (HTTP and MCP) and knowledge bases through the Host API (PROTOCOL §6, §8), against careless upstreams too. */

let world: ResourcesFixture;
beforeAll(async () => {
  world = await startResourcesFixture();
});
afterAll(async () => {
  await world?.close();
});

describe("tools", () => {
  it("calls an HTTP tool with its secret headers, and records the call in the ledger", async () => {
    const { result, runId } = await world.inRun("http-tool", async ({ api }) => ({
      detail: await api("tool.detail", { tool_name: "weather" }),
      call: await api("tool.call", { tool_name: "weather", parameters: { city: "Oslo", days: 2 } }),
    }));
    expect(result.detail.body.data).toEqual({ tool_name: "weather", description: "weather tool", parameters: WEATHER_PARAMS });
    expect(result.call.status).toBe(200);
    expect(result.call.body.data).toMatchObject({ tool_name: "weather", result: { city: "Oslo", forecast: "sunny", days: 2 } });
    const toolCallId = result.call.body.data.tool_call_id;
    const seen = world.tools.calls.find((c) => c.headers["x-agent-tool-call-id"] === toolCallId)!;
    expect(seen).toMatchObject({ path: "/weather", body: { city: "Oslo", days: 2 } });
    expect(seen.headers["x-api-key"]).toBe(world.SECRETS.weather);
    expect(seen.headers["x-agent-run-id"]).toBe(runId);

    const calls = (await world.ledger(runId)).filter((e) => e.type.startsWith("tool.call."));
    expect(calls.map((e) => [e.type, e.origin, e.data.tool_call_id])).toEqual([
      ["tool.call.started", "host", toolCallId],
      ["tool.call.completed", "host", toolCallId],
    ]);
    expect(calls[0].data.parameters).toEqual({ city: "Oslo", days: 2 });
    expect(calls[1].data.result).toEqual({ city: "Oslo", forecast: "sunny", days: 2 });
  });

  it("calls tools discovered on an MCP server over streamable HTTP, on one session per run", async () => {
    const run = () =>
      world.inRun("mcp-tool", async ({ api }) => ({
        add: await api("tool.call", { tool_name: "calc.add", parameters: { a: 2, b: 3 } }),
        shout: await api("tool.call", { tool_name: "calc.shout", parameters: { text: "hey" } }),
        again: await api("tool.call", { tool_name: "calc.add", parameters: { a: 1, b: 1 } }),
      }));
    const before = world.mcp.calls.length;
    const { result } = await run();
    expect(result.add.body.data.result).toEqual({ content: [{ type: "text", text: "5" }], structuredContent: { sum: 5 }, isError: false });
    expect(result.shout.body.data.result).toEqual({ content: [{ type: "text", text: "HEY" }], isError: false });
    expect(result.again.body.data.result).toMatchObject({ structuredContent: { sum: 2 } });
    // Three calls, one handshake: the session is opened by the first call and kept for the run.
    const methods = () => world.mcp.calls.slice(before).map((c) => c.method);
    expect(methods().filter((m) => m === "initialize")).toHaveLength(1);
    expect(methods().filter((m) => m === "tools/call")).toHaveLength(3);
    // The next run opens its own.
    await run();
    expect(methods().filter((m) => m === "initialize")).toHaveLength(2);
  });

  it("refuses parameters that do not match the tool's schema with 400, without reaching the tool", async () => {
    const httpBefore = world.tools.calls.length;
    const mcpBefore = world.mcp.calls.filter((c) => c.method === "tools/call").length;
    const { result, runId } = await world.inRun("invalid-params", async ({ api }) => ({
      http: await api("tool.call", { tool_name: "weather", parameters: { city: 5, days: 9, extra: true } }),
      missing: await api("tool.call", { tool_name: "weather", parameters: {} }),
      mcp: await api("tool.call", { tool_name: "calc.add", parameters: { a: "two", b: 3 } }),
    }));
    expect(result.http.status).toBe(400);
    expect(result.http.body.error.code).toBe("invalid_argument");
    expect(result.http.body.error.details.issues.map((i: any) => i.path).sort()).toEqual(["/city", "/days", "/extra"]);
    expect([result.missing.status, result.missing.body.error.details.issues]).toEqual([400, [{ path: "/city", message: "is required" }]]);
    expect([result.mcp.status, result.mcp.body.error.code]).toEqual([400, "invalid_argument"]);
    expect(world.tools.calls.length).toBe(httpBefore);
    expect(world.mcp.calls.filter((c) => c.method === "tools/call").length).toBe(mcpBefore);
    expect((await world.ledger(runId)).filter((e) => e.type.startsWith("tool.call."))).toEqual([]);
  });

  it("stores a result over the inline limit as an artifact and returns a reference", async () => {
    const { result } = await world.inRun("big-tool", async ({ api }) => api("tool.call", { tool_name: "big", parameters: {} }));
    const ref = result.body.data.result_ref;
    expect(result.body.data.result).toBeUndefined();
    expect(ref).toMatchObject({ artifact_type: "tool_result", mime_type: "application/json", name: "big-result.json" });
    expect(ref.size_bytes).toBeGreaterThan(INLINE_LIMIT);
    const stored = JSON.parse(Buffer.from((await world.host.r2Object(`artifacts/${ref.artifact_id}`))!).toString("utf8"));
    expect(stored.blob).toHaveLength(4 * INLINE_LIMIT);
  });

  it("ends a tool call that does not answer within the per-call timeout", async () => {
    const started = Date.now();
    const { result, runId } = await world.inRun("slow-tool", async ({ api }) => api("tool.call", { tool_name: "slow", parameters: {} }));
    expect([result.status, result.body.error.code]).toEqual([408, "deadline_exceeded"]);
    expect(result.body.error.message).toContain(`${TOOL_TIMEOUT_MS} ms`);
    expect(Date.now() - started).toBeLessThan(5_000);
    const completed = (await world.ledger(runId)).find((e) => e.type === "tool.call.completed");
    expect(completed?.data.error).toMatchObject({ code: "deadline_exceeded" });
  });

  it("records how a tool call still in flight at the runner's run.completed ended, before the run's end", async () => {
    const { runId } = await world.inRun("tool-at-completed", async ({ api }) => {
      const before = world.tools.calls.filter((c) => c.path === "/slow").length;
      void api("tool.call", { tool_name: "slow", parameters: {} });
      // The call has reached the tool: the run ends with it in flight.
      while (world.tools.calls.filter((c) => c.path === "/slow").length === before) await new Promise((r) => setTimeout(r, 5));
      return "done";
    });
    const ledger = await world.ledger(runId);
    const types = ledger.map((e) => e.type);
    const started = ledger.find((e) => e.type === "tool.call.started")!;
    const completed = ledger.find((e) => e.type === "tool.call.completed");
    expect(completed?.data).toMatchObject({ tool_call_id: started.data.tool_call_id, error: { code: "runtime_error", message: "the run was stopped during the call" } });
    expect(types.at(-1)).toBe("run.completed");
    expect(types.indexOf("tool.call.completed")).toBeLessThan(types.indexOf("run.completed"));
  });

  it("scrubs a tool's own credentials from what it answers", async () => {
    const { result } = await world.inRun("echo-tool", async ({ api }) => api("tool.call", { tool_name: "echo_auth", parameters: {} }));
    expect(result.body.data.result).toEqual({ you_sent: "[redacted]" });
    expect(world.tools.calls.find((c) => c.path === "/echo-auth")?.headers["x-api-key"]).toBe(world.SECRETS.echo);
  });
});

describe("careless upstreams", () => {
  it("have their credentials scrubbed from what they answer: secrets JSON escapes, and secrets in endpoint URLs", async () => {
    const { result } = await world.inRun("careless", async ({ api }) => ({
      quote: await api("tool.call", { tool_name: "echo_quote", parameters: {} }),
      url: await api("tool.call", { tool_name: "echo_url", parameters: {} }),
      mcp: await api("tool.call", { tool_name: "keyed.shout", parameters: { text: "psst" } }),
      kb: await api("knowledge.retrieve", { kb_id: "quoted-kb", query: "echo", top_k: 1 }),
    }));
    expect(result.quote.body.data.result).toEqual({ you_sent: "[redacted]" });
    expect(world.tools.calls.find((c) => c.headers["x-api-key"] === world.SECRETS.quoted)).toBeDefined();
    expect(result.url.body.data.result).toEqual({ path: "/echo-url?key=[redacted]&lang=en" });
    expect(result.mcp.body.data.result).toMatchObject({ content: [{ type: "text", text: "PSST" }] });
    expect(result.kb.body.data?.entries, JSON.stringify(result.kb)).toEqual([{ content: "you sent Bearer [redacted]", score: 1, metadata: { auth: "Bearer [redacted]" } }]);
  });

  it("have the credentials in their URLs masked in admin views", async () => {
    const tool = await world.host.admin("GET", "/v1/admin/tools/echo_url");
    expect(tool.body.endpoint).toBe(`${world.tools.url}/echo-url?key=********&lang=********`);
    const server = await world.host.admin("GET", "/v1/admin/mcp-servers/keyed");
    expect(server.body.url).toBe(`${world.mcp.url}/********?access_token=********`);
    expect(JSON.stringify([tool.body, server.body, (await world.host.admin("GET", "/v1/admin/mcp-servers")).body])).not.toMatch(new RegExp(`${world.SECRETS.urlKey}|${world.SECRETS.mcpPath}|${world.SECRETS.mcpQuery}`));
  });
});

describe("knowledge bases", () => {
  it("retrieves scored entries, best first, at most top_k", async () => {
    const { result, runId } = await world.inRun("retrieve", async ({ api }) => ({
      // §8 sets no cap: the host's own bound is 100.
      thirty: await api("knowledge.retrieve", { kb_id: "docs", query: "refunds", top_k: 30 }),
      three: await api("knowledge.retrieve", { kb_id: "docs", query: "refunds", top_k: 3, filters: { lang: "en" } }),
      // Capped at 100, not refused.
      tooMany: await api("knowledge.retrieve", { kb_id: "docs", query: "refunds", top_k: 101 }),
      // §8: top_k=5 when left out.
      defaulted: await api("knowledge.retrieve", { kb_id: "docs", query: "refunds" }),
    }));
    const entries = result.three.body.data.entries;
    expect(entries).toHaveLength(3);
    expect(entries.map((e: any) => e.score)).toEqual([...entries.map((e: any) => e.score)].sort((a, b) => b - a));
    expect(entries[0]).toMatchObject({ content: expect.stringContaining("refunds passage"), metadata: { doc: expect.any(String) } });
    expect(world.retrieval.calls.slice(-3)).toEqual([
      { authorization: `Bearer ${world.SECRETS.kb}`, body: { query: "refunds", top_k: 3, filters: { lang: "en" } } },
      { authorization: `Bearer ${world.SECRETS.kb}`, body: { query: "refunds", top_k: 100, filters: {} } },
      { authorization: `Bearer ${world.SECRETS.kb}`, body: { query: "refunds", top_k: 5, filters: {} } },
    ]);
    expect(result.defaulted.body.data.entries).toHaveLength(5);
    expect(result.thirty.status).toBe(200);
    expect(result.tooMany.status).toBe(200);
    expect((await world.ledger(runId)).filter((e) => e.type === "knowledge.retrieved").map((e) => e.data)).toMatchObject([
      { kb_id: "docs", top_k: 30, entry_count: 30 },
      { kb_id: "docs", top_k: 3, entry_count: 3 },
      { kb_id: "docs", top_k: 100 },
      { kb_id: "docs", top_k: 5, entry_count: 5 },
    ]);
  });
});
