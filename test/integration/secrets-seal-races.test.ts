import type { ServerResponse } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner, type RunCall } from "../support/runner";

/**
 * Secret runner_config fields are sealed for the agent's runner at its service's address (README "Credentials at
 * rest"); a service's move through the admin API reseals them "in the same write". These drills make the other
 * writers of runner_config (reseal, an agent PUT) land while a service moves: each writes only while the service is
 * where it sealed for (reseal leaves the row to its next call; a PUT answers 409 and is sent again).
 */
let host: TestHost;
beforeAll(async () => {
  host = await startTestHost();
});
afterAll(async () => {
  await host?.dispose();
});

const echoConfig = ({ body }: RunCall, res: ServerResponse) => resultWriter(res, body.context.run_id).reply(JSON.stringify(body.context.config));
const agentOn = (id: string, runnerId: string, runner_config: Record<string, unknown>, name = id) => ({ agent_id: id, name, runner_id: runnerId, runner_config, event_types: ["message.received"], scope: { type: "conversation", id } });
async function configSeen(conversation: string) {
  const posted = await host.postEvent(messageEvent(conversation, "hi"));
  const run = await host.waitForRun(posted.body.run_id!);
  return run.status === "completed" ? JSON.parse(String(run.message?.content)) : run.error;
}
const field = (type: string) => [{ name: "default", label: { en_US: "r" }, config_schema: [{ name: "api_key", type, label: { en_US: "Key" } }] as Record<string, unknown>[] }];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("secret runner_config fields and a runner service move", () => {
  it("reseal racing a service move: the agent's secret is sealed for the address the service now has", async () => {
    const PLAIN = "plain-before-secret-91ac";
    const runners = field("string");
    const before = await startAdHocRunner({ name: "race-reseal", runners, onRun: echoConfig });
    const after = await startAdHocRunner({ name: "race-reseal", runners: field("secret"), onRun: echoConfig });
    try {
      const serviceId = (await host.admin("POST", "/v1/admin/runner-services", { base_url: before.url })).body.service.service_id;
      expect((await host.admin("POST", "/v1/admin/agents", agentOn("race-reseal", before.runnerId(), { api_key: PLAIN }))).status).toBe(201);
      // The runner now types the field secret: the value stored before stays readable until reseal (README).
      runners[0].config_schema[0] = { name: "api_key", type: "secret", label: { en_US: "Key" } };
      expect((await host.admin("POST", `/v1/admin/runner-services/${serviceId}/refresh`)).status).toBe(200);
      expect(await configSeen("race-reseal")).toEqual({ api_key: PLAIN });

      // Reseal's write of this agent is held a moment (it carries the stored value as its compare-and-set) while the operator moves the service.
      host.databaseOutage({ delayMs: 1500, matching: PLAIN });
      const resealing = host.admin("POST", "/v1/admin/secrets/reseal");
      await sleep(400);
      expect((await host.admin("PUT", `/v1/admin/runner-services/${serviceId}`, { base_url: after.url })).status).toBe(200);
      const resealed = await resealing;
      expect(resealed.status).toBe(200);

      // Both writes answered success: the agent must still reach its runner, at its new address, with its key.
      expect(await configSeen("race-reseal")).toEqual({ api_key: PLAIN });
    } finally {
      await Promise.all([before.close(), after.close()]);
    }
  });

  it("an agent PUT racing a service move: the agent's new secret is sealed for the address the service now has", async () => {
    const runners = field("secret");
    const before = await startAdHocRunner({ name: "race-put", runners, onRun: echoConfig });
    const after = await startAdHocRunner({ name: "race-put", runners, onRun: echoConfig });
    try {
      const serviceId = (await host.admin("POST", "/v1/admin/runner-services", { base_url: before.url })).body.service.service_id;
      expect((await host.admin("POST", "/v1/admin/agents", agentOn("race-put", before.runnerId(), { api_key: "first-key-0001" }))).status).toBe(201);
      expect(await configSeen("race-put")).toEqual({ api_key: "first-key-0001" });

      // The agent's write (its new name is in it) is held a moment while the operator moves the service.
      const renamed = "race-put-renamed-5e7b";
      host.databaseOutage({ delayMs: 1500, matching: renamed });
      const putting = host.admin("PUT", "/v1/admin/agents/race-put", agentOn("race-put", before.runnerId(), { api_key: "second-key-0002" }, renamed));
      await sleep(400);
      expect((await host.admin("PUT", `/v1/admin/runner-services/${serviceId}`, { base_url: after.url })).status).toBe(200);
      // Sealed for the address the service had: the PUT does not apply (409), and the agent still runs with its key.
      expect((await putting).status).toBe(409);
      expect(await configSeen("race-put")).toEqual({ api_key: "first-key-0001" });
      // Sent again, it is sealed for the address the service has now.
      expect((await host.admin("PUT", "/v1/admin/agents/race-put", agentOn("race-put", before.runnerId(), { api_key: "second-key-0002" }, renamed))).status).toBe(200);
      expect(await configSeen("race-put")).toEqual({ api_key: "second-key-0002" });
    } finally {
      await Promise.all([before.close(), after.close()]);
    }
  });
});
