import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listenLoopback, readBody, sendJson } from "../support/http-server";
import { startTestHost, type TestHost } from "../support/host";
import { startScriptedRunner } from "../support/scripted-runner";

/**
 * Commit 8feec9e: what the host passes on to an upstream as sent never carries a whole number JSON parsing rounded
 * (tool.call arguments, knowledge.retrieve filters, a model call's `extra`). A model call's `tools` (function
 * definitions, forwarded to the provider as sent) is the sibling member left out: a 64-bit id in a tool schema
 * (`const`, `enum`, `default`) reaches the provider rounded, and the model is steered to a different id.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
let provider: Awaited<ReturnType<typeof listenLoopback>>;
const received: string[] = [];
const ID = "9007199254740993"; // 2^53 + 1: JSON parsing reads it as 9007199254740992

beforeAll(async () => {
  provider = await listenLoopback(async (req, res) => {
    received.push(await readBody(req));
    return sendJson(res, 200, { choices: [{ index: 0, message: { role: "assistant", content: "ok" }, finish_reason: "stop" }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } });
  });
  runner = await startScriptedRunner({ name: "model-tools-exact", runners: [{ name: "default", label: { en_US: "x" }, permissions: { models: ["invoke"] } }] });
  host = await startTestHost();
  expect((await host.admin("POST", "/v1/admin/models", { model_id: "chat", name: "chat", kind: "llm", base_url: `${provider.url}/v1`, api_key: "sk-exact-test-key", model: "m" })).status).toBe(201);
  await runner.register(host);
  const agent = await host.admin("POST", "/v1/admin/agents", {
    agent_id: "x", name: "x", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "global" }, resource_policy: { models: ["chat"] },
  });
  expect(agent.status).toBe(201);
});
afterAll(async () => {
  await host?.dispose();
  await Promise.all([runner?.close(), provider?.close()]);
});

const rawCall = async (ctx: any, text: string) => {
  const res = await fetch(`${ctx.runtime.api.base_url}/v1/runs/${ctx.run_id}/api`, { method: "POST", headers: { authorization: `Bearer ${ctx.runtime.api.token}` }, body: text });
  return { status: res.status, body: (await res.json()) as any };
};

describe("a 64-bit whole number in model.invoke tools", () => {
  it("reaches the provider exactly, or is refused (400) without calling it; never rounded", async () => {
    const tools = `[{"type":"function","function":{"name":"pick","parameters":{"type":"object","properties":{"account":{"type":"integer","const":${ID}}}}}}]`;
    const { result } = await runner.run(host, "exact-model-tools", async (_api, ctx) =>
      rawCall(ctx, `{"action":"model.invoke","params":{"model_id":"chat","messages":[{"role":"user","content":"hi"}],"tools":${tools}}}`),
    );
    if (result.status === 400) {
      expect(result.body.error.code).toBe("invalid_argument");
      expect(received).toEqual([]);
    } else {
      expect(received).toHaveLength(1);
      expect(received[0]).toContain(ID);
    }
  });
});
