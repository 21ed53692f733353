import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listenLoopback, readBody, sendJson } from "../support/http-server";
import { startTestHost, type TestHost } from "../support/host";
import { startScriptedRunner } from "../support/scripted-runner";

/**
 * A tool schema's `pattern` runs in linear time (RE2), inside the Worker: an argument the runner (i.e. a model)
 * chooses cannot hold the isolate with exponential backtracking, and a pattern only a backtracking engine could
 * run is refused when the tool is registered, as is a keyword the validator cannot enforce.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
let tool: Awaited<ReturnType<typeof listenLoopback>>;

beforeAll(async () => {
  tool = await listenLoopback(async (req, res) => {
    await readBody(req);
    sendJson(res, 200, { ok: true });
  });
  runner = await startScriptedRunner({ name: "redos", runners: [{ name: "default", label: { en_US: "redos" }, permissions: { tools: ["detail", "call"] } }] });
  host = await startTestHost();
  const reg = await host.admin("POST", "/v1/admin/tools", {
    name: "lookup",
    description: "a lookup keyed by a word list",
    endpoint: `${tool.url}/lookup`,
    parameters: { type: "object", properties: { words: { type: "string", pattern: "^([a-z]+\\s?)+$" } }, required: ["words"] },
  });
  if (reg.status !== 201) throw new Error(JSON.stringify(reg.body));
  await runner.register(host);
  const agent = await host.admin("POST", "/v1/admin/agents", {
    agent_id: "redos", name: "redos", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "global" }, resource_policy: { tools: ["lookup"] },
  });
  if (agent.status !== 201) throw new Error(JSON.stringify(agent.body));
});

afterAll(async () => {
  await host?.dispose();
  await Promise.all([runner?.close(), tool?.close()]);
});

describe("tool argument patterns", () => {
  it("checks an argument against a pattern that backtracks exponentially elsewhere, and answers 400 at once", async () => {
    const { result } = await runner.run(host, "redos", async (api) => {
      const refused = await api("tool.call", { tool_name: "lookup", parameters: { words: `${"a".repeat(5_000)}!` } });
      const passed = await api("tool.call", { tool_name: "lookup", parameters: { words: "some words here" } });
      return { refused: [refused.status, refused.body.error?.code], passed: passed.status };
    });
    expect(result).toEqual({ refused: [400, "invalid_argument"], passed: 200 });
  });

  it("refuses to register a pattern with lookaround or a backreference (400), naming why", async () => {
    const res = await host.admin("POST", "/v1/admin/tools", {
      name: "lookahead",
      description: "",
      endpoint: `${tool.url}/lookup`,
      parameters: { type: "object", properties: { word: { type: "string", pattern: "^(?!admin)[a-z]+$" } } },
    });
    expect([res.status, res.body.error?.code]).toEqual([400, "invalid_request"]);
    expect(res.body.error.message).toContain("lookaround, backreferences and counted repeats over 1000 are not supported");
  });

  it("refuses to register a schema closed with unevaluatedProperties, which it cannot enforce (400), rather than let anything through", async () => {
    const res = await host.admin("POST", "/v1/admin/tools", {
      name: "closed",
      description: "",
      endpoint: `${tool.url}/closed`,
      parameters: { type: "object", properties: { city: { type: "string" } }, unevaluatedProperties: false },
    });
    expect([res.status, res.body.error?.code]).toEqual([400, "invalid_request"]);
    expect(res.body.error.message).toContain("unevaluatedProperties is not supported");
  });
});
