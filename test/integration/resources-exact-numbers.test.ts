import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listenLoopback, readBody, sendJson } from "../support/http-server";
import { startTestHost, type TestHost } from "../support/host";
import { startScriptedRunner } from "../support/scripted-runner";

/**
 * README "HTTP API": values the host keeps and passes on as sent never carry a whole number JSON parsing rounded
 * (a 64-bit id): such a number is a 400 ("send it as a string"), never passed on altered. A runner's tool.call
 * arguments and knowledge.retrieve filters are passed on to an upstream, which acts on them (PROTOCOL: payloads
 * that cause side effects are strictly validated): a 64-bit order id must reach the tool exactly, or be refused;
 * silently rounded, the tool acts on another order.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
let upstream: Awaited<ReturnType<typeof listenLoopback>>;
const received: { path: string; raw: string }[] = [];
const ID = "9007199254740993"; // 2^53 + 1: JSON parsing reads it as 9007199254740992

beforeAll(async () => {
  upstream = await listenLoopback(async (req, res) => {
    received.push({ path: req.url ?? "", raw: await readBody(req) });
    if (req.url === "/kb") return sendJson(res, 200, { entries: [] });
    // Upstream answers carrying 64-bit ids, written as a Go or Python service writes them.
    if (req.url === "/kb-ids") return sendRaw(res, `{"entries":[{"content":"order","score":0.5,"metadata":{"order_id":${ID},"small":7}}]}`);
    if (req.url === "/lookup") return sendRaw(res, `{"order_id":${ID},"lines":[{"sku":-${ID}},1.5,12345678901234567890],"note":"id ${ID}"}`);
    // As deep as each check allows, a 64-bit id innermost: the id is a number there, not one level more.
    if (req.url === "/deep") return sendRaw(res, `${"[".repeat(256)}${ID}${"]".repeat(256)}`);
    if (req.url === "/kb-deep") return sendRaw(res, `{"entries":[{"content":"deep","score":0.5,"metadata":{"path":${"[".repeat(64)}${ID}${"]".repeat(64)}}}]}`);
    if (req.url === "/v1/chat/completions") {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(`data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"see","citation_id":${ID}},"finish_reason":null}]}\n\n`);
      res.write(`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n`);
      return void res.end("data: [DONE]\n\n");
    }
    return sendJson(res, 200, { cancelled: true });
  });
  runner = await startScriptedRunner({ name: "exact-numbers", runners: [{ name: "default", label: { en_US: "x" }, permissions: { tools: ["detail", "call"], knowledge_bases: ["retrieve"], models: ["stream"] } }] });
  host = await startTestHost();
  const tool = await host.admin("POST", "/v1/admin/tools", {
    name: "cancel_order",
    endpoint: `${upstream.url}/cancel`,
    parameters: { type: "object", properties: { order_id: { type: "integer" } }, required: ["order_id"] },
  });
  expect(tool.status).toBe(201);
  expect((await host.admin("POST", "/v1/admin/knowledge-bases", { kb_id: "orders", name: "orders", endpoint: `${upstream.url}/kb` })).status).toBe(201);
  expect((await host.admin("POST", "/v1/admin/knowledge-bases", { kb_id: "order-ids", name: "order ids", endpoint: `${upstream.url}/kb-ids` })).status).toBe(201);
  expect((await host.admin("POST", "/v1/admin/tools", { name: "lookup_order", endpoint: `${upstream.url}/lookup`, headers: { "x-api-key": "lookup-secret-0123" }, parameters: { type: "object", properties: {} } })).status).toBe(201);
  expect((await host.admin("POST", "/v1/admin/tools", { name: "deep", endpoint: `${upstream.url}/deep` })).status).toBe(201);
  expect((await host.admin("POST", "/v1/admin/knowledge-bases", { kb_id: "deep", name: "deep", endpoint: `${upstream.url}/kb-deep` })).status).toBe(201);
  expect((await host.admin("POST", "/v1/admin/models", { model_id: "cites", name: "cites", kind: "llm", base_url: `${upstream.url}/v1`, api_key: "sk-cites-0123", model: "cites" })).status).toBe(201);
  await runner.register(host);
  const agent = await host.admin("POST", "/v1/admin/agents", {
    agent_id: "x", name: "x", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "global" },
    resource_policy: { tools: ["cancel_order", "lookup_order", "deep"], knowledge_bases: ["orders", "order-ids", "deep"], models: ["cites"] },
  });
  expect(agent.status).toBe(201);
});
afterAll(async () => {
  await host?.dispose();
  await Promise.all([runner?.close(), upstream?.close()]);
});

function sendRaw(res: import("node:http").ServerResponse, text: string) {
  res.writeHead(200, { "content-type": "application/json" }).end(text);
}

/** A Host API call sent as raw text, as a Python or Go runner serialises a 64-bit int; the answer's text as well, which a runner in such a language reads exactly. */
const rawCall = async (ctx: any, text: string) => {
  const res = await fetch(`${ctx.runtime.api.base_url}/v1/runs/${ctx.run_id}/api`, { method: "POST", headers: { authorization: `Bearer ${ctx.runtime.api.token}` }, body: text });
  const raw = await res.text();
  return { status: res.status, body: JSON.parse(raw) as any, raw };
};

describe("a 64-bit whole number in what the host passes on to an upstream", () => {
  it("in tool.call arguments reaches the tool exactly, or is refused (400) without calling it; never rounded", async () => {
    const { result } = await runner.run(host, "exact-tool", async (_api, ctx) =>
      rawCall(ctx, `{"action":"tool.call","params":{"tool_name":"cancel_order","parameters":{"order_id":${ID}}}}`),
    );
    const sent = received.filter((r) => r.path === "/cancel").map((r) => r.raw);
    if (result.status === 400) {
      expect(result.body.error.code).toBe("invalid_argument");
      expect(sent).toEqual([]);
    } else {
      expect(sent).toEqual([`{"order_id":${ID}}`]);
    }
  });

  it("in knowledge.retrieve filters reaches the endpoint exactly, or is refused (400) without calling it; never rounded", async () => {
    const { result } = await runner.run(host, "exact-kb", async (_api, ctx) =>
      rawCall(ctx, `{"action":"knowledge.retrieve","params":{"kb_id":"orders","query":"q","filters":{"customer_id":${ID}}}}`),
    );
    const sent = received.filter((r) => r.path === "/kb").map((r) => JSON.stringify(JSON.parse(r.raw).filters));
    if (result.status === 400) {
      expect(result.body.error.code).toBe("invalid_argument");
      expect(sent).toEqual([]);
    } else {
      expect(sent.every((f) => f.includes(ID))).toBe(true);
    }
  });

  // The tool has a secret header, so its answer is also scrubbed of it on the way (a kept number is a value there, not an object).
  it("in a tool's or knowledge base's answer reaches the runner as the upstream wrote it, never rounded", async () => {
    const { result, runId } = await runner.run(host, "exact-answers", async (_api, ctx) => ({
      tool: await rawCall(ctx, `{"action":"tool.call","params":{"tool_name":"lookup_order","parameters":{}}}`),
      kb: await rawCall(ctx, `{"action":"knowledge.retrieve","params":{"kb_id":"order-ids","query":"q"}}`),
    }));
    expect(result.tool.status).toBe(200);
    expect(result.tool.raw).toContain(`"result":{"order_id":${ID},"lines":[{"sku":-${ID}},1.5,12345678901234567890],"note":"id ${ID}"}`);
    expect(result.kb.status).toBe(200);
    expect(result.kb.raw).toContain(`"metadata":{"order_id":${ID},"small":7}`);
    // The run's ledger keeps the tool's answer as written, and gives it back so.
    const ledger = await (await fetch(`${host.url}/v1/runs/${runId}/events`, { headers: { authorization: `Bearer ${host.adminToken}` } })).text();
    expect(ledger).toContain(`"result":{"order_id":${ID},"lines":[{"sku":-${ID}},1.5,12345678901234567890]`);
  });

  it("kept as written, counts as a number, not a level, where an answer's depth is bounded (a tool's 256 levels, an entry's metadata)", async () => {
    const { result } = await runner.run(host, "exact-deep", async (_api, ctx) => ({
      tool: await rawCall(ctx, `{"action":"tool.call","params":{"tool_name":"deep","parameters":{}}}`),
      kb: await rawCall(ctx, `{"action":"knowledge.retrieve","params":{"kb_id":"deep","query":"q"}}`),
    }));
    expect([result.tool.status, result.kb.status]).toEqual([200, 200]);
    expect(result.tool.raw).toContain(`"result":${"[".repeat(256)}${ID}${"]".repeat(256)}`);
    expect(result.kb.raw).toContain(`"metadata":{"path":${"[".repeat(64)}${ID}${"]".repeat(64)}}`);
  });

  it("in a model stream's delta reaches the runner as the provider wrote it, as in model.invoke", async () => {
    const { result } = await runner.run(host, "exact-stream", async (_api, ctx) => {
      const body = JSON.stringify({ action: "model.stream", params: { model_id: "cites", messages: [{ role: "user", content: "q" }] } });
      const res = await fetch(`${ctx.runtime.api.base_url}/v1/runs/${ctx.run_id}/api`, { method: "POST", headers: { authorization: `Bearer ${ctx.runtime.api.token}` }, body });
      return { status: res.status, raw: await res.text() };
    });
    expect(result.status).toBe(200);
    expect(result.raw).toContain(`"citation_id":${ID}`);
  });
});
