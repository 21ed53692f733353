import { describe, expect, it } from "vitest";
import { ResourcePolicySchema } from "../../src/agents/policy";
import { AgentRunnerManifestSchema } from "../../src/protocol/manifest";

describe("null in permissions", () => {
  it("is absent in a manifest (a Python SDK dumps unset fields as None)", () => {
    const parsed = AgentRunnerManifestSchema.parse({ name: "r", label: { en_US: "r" }, capabilities: { streaming: true, steering: null }, permissions: { models: null, history: ["page"] }, config_schema: null });
    expect({ capabilities: parsed.capabilities, permissions: parsed.permissions, config_schema: parsed.config_schema }).toEqual({ capabilities: { streaming: true }, permissions: { history: ["page"] }, config_schema: [] });
  });

  it("is refused in an agent's allow: read as omitted it would keep the whole manifest request, wider than meant", () => {
    expect(ResourcePolicySchema.safeParse({ allow: { models: null } }).success).toBe(false);
    expect(ResourcePolicySchema.safeParse({ allow: { models: [] } }).success).toBe(true);
  });
});
