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
    return sendJson(res, 200, { cancelled: true });
  });
  runner = await startScriptedRunner({ name: "exact-numbers", runners: [{ name: "default", label: { en_US: "x" }, permissions: { tools: ["detail", "call"], knowledge_bases: ["retrieve"] } }] });
  host = await startTestHost();
  const tool = await host.admin("POST", "/v1/admin/tools", {
    name: "cancel_order",
    endpoint: `${upstream.url}/cancel`,
    parameters: { type: "object", properties: { order_id: { type: "integer" } }, required: ["order_id"] },
  });
  expect(tool.status).toBe(201);
  expect((await host.admin("POST", "/v1/admin/knowledge-bases", { kb_id: "orders", name: "orders", endpoint: `${upstream.url}/kb` })).status).toBe(201);
  await runner.register(host);
  const agent = await host.admin("POST", "/v1/admin/agents", {
    agent_id: "x", name: "x", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "global" },
    resource_policy: { tools: ["cancel_order"], knowledge_bases: ["orders"] },
  });
  expect(agent.status).toBe(201);
});
afterAll(async () => {
  await host?.dispose();
  await Promise.all([runner?.close(), upstream?.close()]);
});

/** A Host API call sent as raw text, as a Python or Go runner serialises a 64-bit int. */
const rawCall = async (ctx: any, text: string) => {
  const res = await fetch(`${ctx.runtime.api.base_url}/v1/runs/${ctx.run_id}/api`, { method: "POST", headers: { authorization: `Bearer ${ctx.runtime.api.token}` }, body: text });
  return { status: res.status, body: (await res.json()) as any };
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
});
