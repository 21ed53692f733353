/**
 * README "Credentials at rest": an agent's secret runner_config fields are sealed for its runner at its service's
 * address; "Moving an endpoint through the admin API (PUT of a runner service ...) seals its credential again for the
 * new one (a runner service's move also reseals its agents' secret runner_config fields, in the same write)", and
 * reseal "is safe to repeat, and a value changed meanwhile, or one whose row moved meanwhile ... is never
 * overwritten". agent-config-secrets.test.ts drills a reseal whose write is held while the service moves; this is the
 * other order: the move has read the agents and its write is held while a reseal seals an agent's value for the
 * address the service is leaving. Both answer success; the agent must still reach its runner with its key.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { echoConfig, startAdHocRunner } from "../support/runner";

let host: TestHost;
beforeAll(async () => {
  host = await startTestHost();
});
afterAll(async () => {
  await host?.dispose();
});

async function configSeen(conversation: string) {
  const posted = await host.postEvent(messageEvent(conversation, "hi"));
  const run = await host.waitForRun(posted.body.run_id!);
  return run.status === "completed" ? JSON.parse(String(run.message?.content)) : run.error;
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("a runner service move racing a reseal", () => {
  it("leaves the agent's secret sealed for the address the service now has (or one of the two writes is refused)", async () => {
    const PLAIN = "plain-before-secret-77d0";
    const runners = [{ name: "default", label: { en_US: "r" }, config_schema: [{ name: "api_key", type: "string", label: { en_US: "Key" } }] as Record<string, unknown>[] }];
    const before = await startAdHocRunner({ name: "move-reseal", runners, onRun: echoConfig });
    const after = await startAdHocRunner({ name: "move-reseal", runners, onRun: echoConfig });
    try {
      const serviceId = (await host.admin("POST", "/v1/admin/runner-services", { base_url: before.url })).body.service.service_id;
      const agent = { agent_id: "move-reseal", name: "m", runner_id: before.runnerId(), runner_config: { api_key: PLAIN }, event_types: ["message.received"], scope: { type: "conversation", id: "move-reseal" } };
      expect((await host.admin("POST", "/v1/admin/agents", agent)).status).toBe(201);
      // The runner now types the field secret: the value stored before stays readable until reseal (README).
      runners[0].config_schema[0] = { name: "api_key", type: "secret", label: { en_US: "Key" } };
      expect((await host.admin("POST", `/v1/admin/runner-services/${serviceId}/refresh`)).status).toBe(200);
      expect(await configSeen("move-reseal")).toEqual({ api_key: PLAIN });

      // The move's write (the only statement naming the new address) is held a moment, after it read the agents;
      // meanwhile the operator's reseal seals the agent's value for the address the service still has.
      host.databaseOutage({ delayMs: 1500, matching: after.url });
      const moving = host.admin("PUT", `/v1/admin/runner-services/${serviceId}`, { base_url: after.url });
      await sleep(500);
      const resealed = await host.admin("POST", "/v1/admin/secrets/reseal");
      const moved = await moving;
      expect([resealed.status, moved.status]).toContain(200);
      if (resealed.status === 200 && moved.status === 200) {
        // Both writes answered success: the agent must still reach its runner, at its new address, with its key.
        expect(await configSeen("move-reseal")).toEqual({ api_key: PLAIN });
        expect(after.calls.length).toBeGreaterThan(0);
      }
    } finally {
      await Promise.all([before.close(), after.close()]);
    }
  });
  it("an agent saved (PUT or POST) while the move's write is held reaches its runner with its key at the new address", async () => {
    const runners = [{ name: "default", label: { en_US: "r" }, config_schema: [{ name: "api_key", type: "secret", label: { en_US: "Key" } }] }];
    const before = await startAdHocRunner({ name: "move-save", runners, onRun: echoConfig });
    const after = await startAdHocRunner({ name: "move-save", runners, onRun: echoConfig });
    try {
      const serviceId = (await host.admin("POST", "/v1/admin/runner-services", { base_url: before.url })).body.service.service_id;
      const agent = (id: string, key: string) => ({ agent_id: id, name: id, runner_id: before.runnerId(), runner_config: { api_key: key }, event_types: ["message.received"], scope: { type: "conversation", id } });
      expect((await host.admin("POST", "/v1/admin/agents", agent("move-put", "first-key-0001"))).status).toBe(201);
      host.databaseOutage({ delayMs: 1500, matching: after.url });
      const moving = host.admin("PUT", `/v1/admin/runner-services/${serviceId}`, { base_url: after.url });
      await sleep(500);
      const put = await host.admin("PUT", "/v1/admin/agents/move-put", agent("move-put", "second-key-0002"));
      const created = await host.admin("POST", "/v1/admin/agents", agent("move-new", "new-key-0003"));
      const moved = await moving;
      if (moved.status === 200) {
        // Each write that answered success holds: the agents run at the new address with the keys they were given.
        expect(await configSeen("move-put")).toEqual({ api_key: put.status === 200 ? "second-key-0002" : "first-key-0001" });
        if (created.status === 201) expect(await configSeen("move-new")).toEqual({ api_key: "new-key-0003" });
      } else {
        expect(moved.status).toBe(409);
        expect([put.status, created.status]).toEqual([200, 201]);
        expect(await configSeen("move-put")).toEqual({ api_key: "second-key-0002" });
        expect(await configSeen("move-new")).toEqual({ api_key: "new-key-0003" });
      }
    } finally {
      await Promise.all([before.close(), after.close()]);
    }
  });
});
