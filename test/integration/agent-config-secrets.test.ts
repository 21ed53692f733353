import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { messageEvent, startTestHost, type TestHost } from "../support/host";
import { echoConfig, startAdHocRunner } from "../support/runner";

/**
 * runner_config fields a runner types `secret`, at rest (SECRETS_KEY set): sealed for the agent and its runner at its
 * service's address, masked in views, kept when a view is sent back, and only ever opened for that runner's request.
 * (Key changes and reseal: secrets-rotation.test.ts.)
 */
const KEY = "agent-secret-value-4242";
let host: TestHost;
beforeAll(async () => {
  host = await startTestHost();
});
afterAll(async () => {
  await host?.dispose();
});

const agentOn = (id: string, runnerId: string, runner_config: Record<string, unknown>, name = id) => ({ agent_id: id, name, runner_id: runnerId, runner_config, event_types: ["message.received"], scope: { type: "conversation", id } });
const storedConfig = async (agentId: string) => JSON.parse((await host.query<{ v: string }>("SELECT runner_config_json AS v FROM agent WHERE agent_id = ?", [agentId]))[0].v);
async function configSeen(conversation: string) {
  const posted = await host.postEvent(messageEvent(conversation, "hi"));
  const run = await host.waitForRun(posted.body.run_id!);
  return run.status === "completed" ? JSON.parse(String(run.message?.content)) : run.error;
}
const secretSchema = (extra: Record<string, unknown>[] = []) => [{ name: "default", label: { en_US: "r" }, config_schema: [{ name: "api_key", type: "secret", label: { en_US: "Key" } }, ...extra] as Record<string, unknown>[] }];

describe("secret runner_config fields at rest", () => {
  it("a field the refreshed manifest no longer calls secret stays masked, and the view sent back keeps its value, not the mask", async () => {
    const runners = secretSchema([{ name: "region", type: "string", label: { en_US: "Region" } }]);
    const runner = await startAdHocRunner({ name: "unsecret", runners, onRun: echoConfig });
    try {
      const serviceId = (await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).body.service.service_id;
      expect((await host.admin("POST", "/v1/admin/agents", agentOn("unsecret", runner.runnerId(), { api_key: KEY, region: "eu" }))).status).toBe(201);
      expect(await storedConfig("unsecret")).toEqual({ api_key: expect.stringMatching(/^sealed:v3:/), region: "eu" });
      runners[0].config_schema[0] = { name: "api_key", type: "string", label: { en_US: "Key" } };
      expect((await host.admin("POST", `/v1/admin/runner-services/${serviceId}/refresh`)).status).toBe(200);
      const shown = await host.admin("GET", "/v1/admin/agents/unsecret");
      expect(shown.body.runner_config).toEqual({ api_key: "********", region: "eu" });
      expect((await host.admin("PUT", "/v1/admin/agents/unsecret", shown.body)).status).toBe(200);
      expect(await configSeen("unsecret")).toEqual({ api_key: KEY, region: "eu" });
    } finally {
      await runner.close();
    }
  });

  it("is sealed for its service's address: pointed elsewhere in the database it does not open and nothing is sent; moved through the admin API it still works", async () => {
    const runner = await startAdHocRunner({ name: "dest", runners: secretSchema(), onRun: echoConfig });
    const attacker = await startAdHocRunner({ name: "dest", runners: secretSchema(), onRun: echoConfig });
    const moved = await startAdHocRunner({ name: "dest", runners: secretSchema(), onRun: echoConfig });
    try {
      const serviceId = (await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).body.service.service_id;
      expect((await host.admin("POST", "/v1/admin/agents", agentOn("dest", runner.runnerId(), { api_key: KEY }))).status).toBe(201);
      expect(await configSeen("dest")).toEqual({ api_key: KEY });

      // Someone who can write the database, but not read the key, points the service (it has no secret) at a server of theirs.
      await host.query("UPDATE runner_service SET base_url = ? WHERE service_id = ?", [attacker.url, serviceId]);
      expect(await configSeen("dest")).toMatchObject({ code: "host.internal_error", message: expect.stringMatching(/runner_config cannot be used/) });
      expect(attacker.calls).toEqual([]);
      await host.query("UPDATE runner_service SET base_url = ? WHERE service_id = ?", [runner.url, serviceId]);

      // Moved by the operator: sealed again for the new address, with the move.
      expect((await host.admin("PUT", `/v1/admin/runner-services/${serviceId}`, { base_url: moved.url })).status).toBe(200);
      expect(await configSeen("dest")).toEqual({ api_key: KEY });
      expect(moved.calls).toHaveLength(1);
    } finally {
      await Promise.all([runner.close(), attacker.close(), moved.close()]);
    }
  });

  it("an agent whose stored secret no longer opens can be given a new one with PUT", async () => {
    const runner = await startAdHocRunner({ name: "lost", runners: secretSchema(), onRun: echoConfig });
    try {
      expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
      const agent = agentOn("lost", runner.runnerId(), { api_key: KEY });
      expect((await host.admin("POST", "/v1/admin/agents", agent)).status).toBe(201);
      // Sealed under a key since lost: a sealed value nothing opens.
      await host.query("UPDATE agent SET runner_config_json = ? WHERE agent_id = 'lost'", [JSON.stringify({ api_key: `sealed:v3:${Buffer.alloc(40, 1).toString("base64")}` })]);
      expect((await host.admin("PUT", "/v1/admin/agents/lost", { ...agent, runner_config: { api_key: "a-brand-new-key-1234" } })).status).toBe(200);
      expect(await configSeen("lost")).toEqual({ api_key: "a-brand-new-key-1234" });
    } finally {
      await runner.close();
    }
  });

  it("a secret field takes text: a number or an object is refused (400), as only text is sealed", async () => {
    const runner = await startAdHocRunner({ name: "numeric", runners: secretSchema(), onRun: echoConfig });
    try {
      expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
      for (const value of [987654321, { pin: "1" }]) {
        const res = await host.admin("POST", "/v1/admin/agents", agentOn("numeric", runner.runnerId(), { api_key: value }));
        expect([res.status, res.body.error.details]).toEqual([400, { fields: ["api_key"] }]);
      }
      expect((await host.admin("POST", "/v1/admin/agents", agentOn("numeric", runner.runnerId(), { api_key: null }))).status).toBe(201);
    } finally {
      await runner.close();
    }
  });
  it("a value that only looks sealed is taken as given: a secret field seals it and the runner gets it back; another field is refused (400)", async () => {
    const runners = secretSchema([{ name: "note", type: "string", label: { en_US: "Note" } }]);
    const runner = await startAdHocRunner({ name: "lookalike", runners, onRun: echoConfig });
    try {
      expect((await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).status).toBe(201);
      const lookalike = `sealed:v3:${Buffer.alloc(40, 7).toString("base64")}`;
      expect((await host.admin("POST", "/v1/admin/agents", agentOn("lookalike", runner.runnerId(), { api_key: lookalike }))).status).toBe(201);
      expect((await storedConfig("lookalike")).api_key).not.toBe(lookalike);
      expect(await configSeen("lookalike")).toEqual({ api_key: lookalike });

      const refused = await host.admin("PUT", "/v1/admin/agents/lookalike", agentOn("lookalike", runner.runnerId(), { api_key: "********", note: "sealed:v2:abc" }));
      expect([refused.status, refused.body.error.details]).toEqual([400, { fields: ["note"] }]);
      expect(await configSeen("lookalike")).toEqual({ api_key: lookalike });
    } finally {
      await runner.close();
    }
  });

  it("a value stored before its field became secret is sealed when the agent is saved as shown, and still reaches the runner", async () => {
    const runners = [{ name: "default", label: { en_US: "r" }, config_schema: [{ name: "api_key", type: "string", label: { en_US: "Key" } }] as Record<string, unknown>[] }];
    const runner = await startAdHocRunner({ name: "becomesecret", runners, onRun: echoConfig });
    try {
      const serviceId = (await host.admin("POST", "/v1/admin/runner-services", { base_url: runner.url })).body.service.service_id;
      expect((await host.admin("POST", "/v1/admin/agents", agentOn("becomesecret", runner.runnerId(), { api_key: "plain-value-1234" }))).status).toBe(201);
      expect(await storedConfig("becomesecret")).toEqual({ api_key: "plain-value-1234" });
      // The runner now types the field secret.
      runners[0].config_schema[0] = { name: "api_key", type: "secret", label: { en_US: "Key" } };
      expect((await host.admin("POST", `/v1/admin/runner-services/${serviceId}/refresh`)).status).toBe(200);
      const shown = await host.admin("GET", "/v1/admin/agents/becomesecret");
      expect(shown.body.runner_config).toEqual({ api_key: "********" });
      // The operator saves the agent as shown: the secret field's value enters through this PUT and must be sealed.
      expect((await host.admin("PUT", "/v1/admin/agents/becomesecret", shown.body)).status).toBe(200);
      expect(await storedConfig("becomesecret")).toEqual({ api_key: expect.stringMatching(/^sealed:v3:/) });
      expect(await configSeen("becomesecret")).toEqual({ api_key: "plain-value-1234" });
    } finally {
      await runner.close();
    }
  });
});

/** A runner whose one config field `api_key` is still plain text. */
const plainSchema = () => [{ name: "default", label: { en_US: "r" }, config_schema: [{ name: "api_key", type: "string", label: { en_US: "Key" } }] as Record<string, unknown>[] }];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Secret runner_config fields are sealed for the agent's runner at its service's address (README "Credentials at
 * rest"); a service's move through the admin API reseals them "in the same write". These drills make the other
 * writers of runner_config (reseal, an agent PUT) land while a service moves: each writes only while the service is
 * where it sealed for (reseal leaves the row to its next call; a PUT answers 409 and is sent again).
 */
describe("secret runner_config fields and a runner service move", () => {
  it("reseal racing a service move: the agent's secret is sealed for the address the service now has", async () => {
    const PLAIN = "plain-before-secret-91ac";
    const runners = plainSchema();
    const before = await startAdHocRunner({ name: "race-reseal", runners, onRun: echoConfig });
    const after = await startAdHocRunner({ name: "race-reseal", runners: secretSchema(), onRun: echoConfig });
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
    const runners = secretSchema();
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
