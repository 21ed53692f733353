import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { resultWriter, startAdHocRunner } from "../support/runner";

/**
 * README: a runner service "can be deleted only once no agent runs on it (409 names them)". The DELETE asks the
 * database for the agents on the service's runners only: it never reads every agent whole (each with its
 * runner_config, up to the body limit), and names at most 100 of them while counting them all.
 */
let host: TestHost;
type Runner = Awaited<ReturnType<typeof startAdHocRunner>>;
let used: Runner;
let unused: Runner;
const ids: Record<string, string> = {};

/** A database read of agents' whole rows (their runner_config) fails while this is armed (the outage drill). */
const READS_AGENT_CONFIGS = '\\"runner_config_json\\"';

beforeAll(async () => {
  const onRun = ({ body }: { body: any }, res: import("node:http").ServerResponse) => resultWriter(res, body.context.run_id).reply("ok");
  used = await startAdHocRunner({ name: "svc-used", onRun });
  unused = await startAdHocRunner({ name: "svc-unused", onRun });
  host = await startTestHost();
  for (const [name, r] of Object.entries({ used, unused })) {
    const reg = await host.admin("POST", "/v1/admin/runner-services", { base_url: r.url });
    expect(reg.status).toBe(201);
    ids[name] = reg.body.service.service_id;
  }
});
afterAll(async () => {
  await host?.dispose();
  await used?.close();
  await unused?.close();
});

const agentOn = (agentId: string, runnerId: string) => ({ agent_id: agentId, name: agentId, runner_id: runnerId, runner_config: { note: "x".repeat(1000) }, event_types: ["message.received"], scope: { type: "conversation", id: agentId } });

describe("DELETE /v1/admin/runner-services/{id}", () => {
  it("finds the agents on the service's runners without reading every agent: 409 naming at most 100 and counting them all, 204 once none", async () => {
    for (let i = 0; i < 103; i++) expect((await host.admin("POST", "/v1/admin/agents", agentOn(`on-used-${String(i).padStart(3, "0")}`, used.runnerId()))).status).toBe(201);
    try {
      host.databaseOutage({ queries: 1, matching: READS_AGENT_CONFIGS });
      const refused = await host.admin("DELETE", `/v1/admin/runner-services/${ids.used}`);
      expect([refused.status, refused.body.error?.code]).toEqual([409, "conflict"]);
      expect(refused.body.error.details.agent_count).toBe(103);
      expect(refused.body.error.details.agents).toHaveLength(100);
      expect(refused.body.error.details.agents.slice(0, 2)).toEqual(["on-used-000", "on-used-001"]);
      expect(refused.body.error.message).toMatch(/ and 3 more: delete them or move them/);
      // A service no agent runs on goes, still without a read of the agents.
      const deleted = await host.admin("DELETE", `/v1/admin/runner-services/${ids.unused}`);
      expect(deleted.status).toBe(204);
    } finally {
      host.databaseOutage({ queries: 0 });
    }
  });
});
