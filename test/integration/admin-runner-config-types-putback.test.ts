import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { listenLoopback, sendJson, type LoopbackServer } from "../support/http-server";

/**
 * README, agents: "`PUT` replaces the agent (the body of `POST`; what `GET` answered can be sent back as it is)", and
 * "a refresh that changes a type does not re-check stored agents". So an agent whose stored value a refresh made
 * mistyped is kept, and what GET answers for it must still go back through PUT (to disable it, say), as an agent
 * an earlier release left lacking a required field still takes writes that do not make it worse.
 */
let host: TestHost;
let service: LoopbackServer;
let schema: Record<string, unknown>[] = [];
const label = { en_US: "f" };
const runnerId = "http:tests/retyped/default";

beforeAll(async () => {
  service = await listenLoopback((_req, res) =>
    sendJson(res, 200, { protocol: "agent-runner/v1", author: "tests", name: "retyped", version: "1", runners: [{ name: "default", label: { en_US: "retyped" }, config_schema: schema }] }),
  );
  host = await startTestHost();
});
afterAll(async () => {
  await host?.dispose();
  await service?.close();
});

describe("an agent whose stored runner_config a refresh made mistyped", () => {
  it("can be sent back as GET answered it (here to disable it)", async () => {
    schema = [
      { name: "timeout", type: "string", label },
      { name: "mode", type: "select", label, options: ["fast", "careful"] },
    ];
    const serviceId = (await host.admin("POST", "/v1/admin/runner-services", { base_url: service.url })).body.service.service_id;
    const body = { agent_id: "retyped", name: "retyped", runner_id: runnerId, event_types: ["message.received"], scope: { type: "conversation", id: "retyped" }, runner_config: { timeout: "30", mode: "fast" } };
    expect((await host.admin("POST", "/v1/admin/agents", body)).status).toBe(201);

    // The runner now says timeout is an integer and no longer offers "fast": the refresh is taken.
    schema = [
      { name: "timeout", type: "integer", label },
      { name: "mode", type: "select", label, options: ["careful", "thorough"] },
    ];
    expect((await host.admin("POST", `/v1/admin/runner-services/${serviceId}/refresh`)).status).toBe(200);

    const read = (await host.admin("GET", "/v1/admin/agents/retyped")).body;
    const put = await host.admin("PUT", "/v1/admin/agents/retyped", { ...read, enabled: false });
    expect([put.status, put.body.error?.details]).toEqual([200, undefined]);
    expect((await host.admin("GET", "/v1/admin/agents/retyped")).body.enabled).toBe(false);

    // A value changed to another mistyped one is still refused (on the agent as read again: the PUT above changed it).
    const reread = (await host.admin("GET", "/v1/admin/agents/retyped")).body;
    const changed = await host.admin("PUT", "/v1/admin/agents/retyped", { ...reread, runner_config: { timeout: "31", mode: "fast" } });
    expect([changed.status, changed.body.error?.details?.mistyped]).toEqual([400, [{ field: "timeout", expected: "a whole number" }]]);
  });
});
