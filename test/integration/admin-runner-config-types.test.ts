import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { startScriptedRunner } from "../support/scripted-runner";

/**
 * An agent's runner_config is what its runner gets as `ctx.config`, and the runner's config_schema says what each
 * field is (LangBot's form types: integer, float, boolean, string, text, array[string], select). A value of another
 * type (a timeout sent as "30", a select outside its options) is a 400 naming the field, not a run that fails later.
 */
let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;
const label = { en_US: "f" };

beforeAll(async () => {
  runner = await startScriptedRunner({
    name: "config-types",
    runners: [
      {
        name: "default",
        label: { en_US: "typed" },
        config_schema: [
          { name: "timeout", type: "integer", label },
          { name: "temperature", type: "float", label },
          { name: "verbose", type: "boolean", label },
          { name: "greeting", type: "string", label },
          { name: "stops", type: "array[string]", label },
          { name: "mode", type: "select", label, options: ["fast", { name: "careful", label: { en_US: "Careful" } }] },
          { name: "widget", type: "llm-model-selector", label },
        ],
      },
    ],
  });
  host = await startTestHost();
  await runner.register(host);
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

const agent = (agent_id: string, runner_config: Record<string, unknown>) => ({ agent_id, name: agent_id, runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "conversation", id: agent_id }, runner_config });

describe("runner_config against its config_schema types", () => {
  it("refuses each mistyped field with a 400 naming it and what it takes, and stores nothing", async () => {
    const res = await host.admin("POST", "/v1/admin/agents", agent("typed-bad", { timeout: "30", temperature: 0.5, verbose: "yes", greeting: 5, stops: ["a", 1], mode: "reckless", widget: { any: "thing" } }));
    expect([res.status, res.body.error.code, res.body.error.details.mistyped]).toEqual([
      400,
      "invalid_request",
      [
        { field: "timeout", expected: "a whole number" },
        { field: "verbose", expected: "true or false" },
        { field: "greeting", expected: "text" },
        { field: "stops", expected: "a list of texts" },
        { field: "mode", expected: 'one of "fast", "careful"' },
      ],
    ]);
    expect((await host.admin("GET", "/v1/admin/agents/typed-bad")).status).toBe(404);
  });

  it("refuses a mistyped field on PUT too, keeping the agent as it was", async () => {
    expect((await host.admin("POST", "/v1/admin/agents", agent("typed-put", { timeout: 30 }))).status).toBe(201);
    const res = await host.admin("PUT", "/v1/admin/agents/typed-put", agent("typed-put", { timeout: 1.5 }));
    expect([res.status, (await host.admin("GET", "/v1/admin/agents/typed-put")).body.runner_config]).toEqual([400, { timeout: 30 }]);
  });

  it("takes values of their types, null for unset, and passes them to the runner as ctx.config", async () => {
    const config = { timeout: 30, temperature: 1, verbose: false, greeting: "", stops: [], mode: "careful", widget: { any: "thing" } };
    const res = await host.admin("POST", "/v1/admin/agents", agent("typed-good", { ...config, greeting: null }));
    expect(res.status).toBe(201);
    expect((await host.admin("PUT", "/v1/admin/agents/typed-good", agent("typed-good", config))).status).toBe(200);
    const { result } = await runner.run(host, "typed-good", async (_api, ctx) => ctx.config);
    expect(result).toEqual(config);
  });
});
