import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startFakeTools } from "../support/fake-tool";
import { startTestHost, type TestHost } from "../support/host";
import { startScriptedRunner } from "../support/scripted-runner";

/**
 * Arguments not matching the tool's JSON Schema are refused (400) before the tool is called, and one the
 * validator cannot finish checking is refused, never passed because a cut-short `if` or `not` read as a
 * mismatch. The argument's nesting is bounded (64 levels) apart from the schema hops ($ref, combinators) that
 * check it, so a valid recursive argument well within that depth passes, and a forbidden one deep in it does not.
 */

/** A chain of steps, none of which may be an admin step (a recursive `not`). */
const CHAIN_PARAMS = {
  type: "object",
  properties: { chain: { $ref: "#/$defs/step" } },
  required: ["chain"],
  not: { properties: { chain: { $ref: "#/$defs/hasAdmin" } } },
  $defs: {
    step: { type: "object", properties: { role: { type: "string" }, next: { $ref: "#/$defs/step" } } },
    hasAdmin: {
      anyOf: [
        { properties: { role: { const: "admin" } }, required: ["role"] },
        { properties: { next: { $ref: "#/$defs/hasAdmin" } }, required: ["next"] },
      ],
    },
  },
};
/** A tree of nodes (a folder tree, a comment thread). */
const TREE_PARAMS = {
  type: "object",
  properties: { root: { $ref: "#/$defs/node" } },
  required: ["root"],
  $defs: { node: { type: "object", properties: { name: { type: "string" }, children: { type: "array", items: { $ref: "#/$defs/node" } } }, required: ["name"] } },
};
const chain = (steps: number, last: string): any => (steps === 0 ? { role: last } : { role: "user", next: chain(steps - 1, last) });
const tree = (levels: number): any => (levels === 0 ? { name: "leaf" } : { name: `level-${levels}`, children: [tree(levels - 1)] });
const jsonDepth = (v: unknown): number => (v && typeof v === "object" ? 1 + Math.max(0, ...Object.values(v).map(jsonDepth)) : 0);

let host: TestHost;
let tools: Awaited<ReturnType<typeof startFakeTools>>;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;

beforeAll(async () => {
  tools = await startFakeTools({ bigBytes: 10 });
  runner = await startScriptedRunner({ name: "depth", runners: [{ name: "default", label: { en_US: "depth" }, permissions: { tools: ["detail", "call"] } }] });
  host = await startTestHost({});
  for (const [name, parameters] of [["chain_tool", CHAIN_PARAMS], ["tree_tool", TREE_PARAMS]] as const) {
    const r = await host.admin("POST", "/v1/admin/tools", { name, endpoint: `${tools.url}/weather`, parameters });
    if (r.status !== 201) throw new Error(JSON.stringify(r.body));
  }
  await runner.register(host);
  const agent = await host.admin("POST", "/v1/admin/agents", {
    agent_id: "depth", name: "depth", runner_id: runner.runnerId(), event_types: ["message.received"], scope: { type: "global" },
    resource_policy: { tools: ["chain_tool", "tree_tool"] },
  });
  if (agent.status !== 201) throw new Error(JSON.stringify(agent.body));
});
afterAll(async () => {
  await host?.dispose();
  await Promise.all([runner?.close(), tools?.close()]);
});

describe("tool argument validation and nesting", () => {
  it("refuses an argument that breaks a recursive `not` deep in the chain, without calling the tool", async () => {
    const before = tools.calls.length;
    const { result } = await runner.run(host, "depth-not", async (api) => ({
      shallow: await api("tool.call", { tool_name: "chain_tool", parameters: { chain: chain(5, "admin") } }),
      deep: await api("tool.call", { tool_name: "chain_tool", parameters: { chain: chain(20, "admin") } }),
    }));
    // The schema works: an admin step 5 deep is refused.
    expect([result.shallow.status, result.shallow.body.error?.code]).toEqual([400, "invalid_argument"]);
    // 21 levels of JSON (the Host API takes 64): the admin step at the end must be refused all the same.
    expect(jsonDepth(chain(20, "admin"))).toBe(21);
    expect([result.deep.status, result.deep.body.error?.code]).toEqual([400, "invalid_argument"]);
    expect(tools.calls.length).toBe(before);
  });

  it("accepts a valid recursive argument nested well within the Host API's limit", async () => {
    const root = tree(22);
    expect(jsonDepth(root)).toBeLessThan(64);
    const { result } = await runner.run(host, "depth-tree", async (api) => api("tool.call", { tool_name: "tree_tool", parameters: { root } }));
    expect({ status: result.status, error: result.body.error?.message }).toEqual({ status: 200, error: undefined });
  });
});
