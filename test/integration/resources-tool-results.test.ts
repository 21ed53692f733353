import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startResourcesFixture, INLINE_LIMIT, type ResourcesFixture } from "../support/resources-fixture";

let world: ResourcesFixture;

/** A tool whose schema requires `confirm` when the recipients include the all-staff list. */
const MAILER_PARAMS = {
  type: "object",
  properties: { recipients: { type: "array", items: { type: "string" } }, confirm: { const: true } },
  required: ["recipients"],
  if: { properties: { recipients: { contains: { const: "all@corp.example" } } } },
  then: { required: ["confirm"] },
};

beforeAll(async () => {
  world = await startResourcesFixture();
  const post = async (path: string, body: unknown) => {
    const res = await world.host.admin("POST", path, body);
    if (res.status !== 201) throw new Error(`${path}: ${res.status} ${JSON.stringify(res.body)}`);
  };
  await post("/v1/admin/tools", { name: "mailer", description: "sends mail", endpoint: `${world.tools.url}/weather`, parameters: MAILER_PARAMS });
  await post("/v1/admin/agents", {
    agent_id: "mail",
    name: "mail",
    runner_id: world.runner.runnerId(),
    event_types: ["message.received"],
    scope: { type: "conversation", id: "mail" },
    resource_policy: { tools: ["mailer"] },
  });
});
afterAll(async () => {
  await world?.close();
});

/**
 * A large tool result comes back as `result_ref`: readable by the run that
 * called the tool even without the artifacts API (only that run: another run
 * without it is refused). A tool's argument schema is enforced however large
 * the arguments: a validation out of its budget refuses, never lets through.
 */
describe("tool results and arguments", () => {
  it("a tool result returned as result_ref can be read back by the run that called the tool", async () => {
    // The runner asks for tools, not for the artifacts API: the result of its own call is still its own.
    const { result } = await world.inRun("big-readable", async ({ api, ctx }) => {
      const call = await api("tool.call", { tool_name: "big", parameters: {} });
      const ref = call.body.data?.result_ref;
      const read = ref ? await api("artifact.read", { artifact_id: ref.artifact_id }) : null;
      return { apis: ctx.context.available_apis, ref, read };
    });
    expect(result.ref?.size_bytes).toBeGreaterThan(INLINE_LIMIT);
    expect(result.apis.artifact_read).toBe(false);
    expect({ status: result.read?.status, code: result.read?.body.error?.code }).toEqual({ status: 200, code: undefined });
    expect(JSON.parse(Buffer.from(result.read.body.data.content_base64, "base64").toString("utf8")).blob).toHaveLength(4 * INLINE_LIMIT);
    // Another run of the conversation, without the artifacts API, is refused as before.
    const other = await world.inRun("big-readable", ({ api }) => api("artifact.metadata", { artifact_id: result.ref.artifact_id }));
    expect([other.result.status, other.result.body.error?.code]).toEqual([403, "unauthorized"]);
  });

  it("refuses arguments that break the tool's if/then, however long the list before the match", async () => {
    const before = world.tools.calls.length;
    const padded = [...Array(60_000).fill("a@corp.example"), "all@corp.example"];
    const { result } = await world.inRun("mail", async ({ api }) => ({
      short: await api("tool.call", { tool_name: "mailer", parameters: { recipients: ["all@corp.example"] } }),
      long: await api("tool.call", { tool_name: "mailer", parameters: { recipients: padded } }),
    }));
    expect([result.short.status, result.short.body.error?.code]).toEqual([400, "invalid_argument"]);
    expect([result.long.status, result.long.body.error?.code]).toEqual([400, "invalid_argument"]);
    // Nothing reached the tool without the confirmation its schema demands.
    expect(world.tools.calls.length).toBe(before);
  });
});
