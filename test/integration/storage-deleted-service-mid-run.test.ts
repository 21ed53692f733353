import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { deferred } from "../support/host-api";
import { startTestHost, type TestHost } from "../support/host";
import { putAgent, startScriptedRunner } from "../support/scripted-runner";

/**
 * README: a runner service's plugin area is deleted with the service. A run still going when its service is deleted
 * writes no more plugin storage (its storage.set answers as usual; nothing is kept, migration 0013), as a deleted
 * agent's run writes no more state (0012): a row under a service id no service will have again is read by no run.
 */
let host: TestHost;
const b64 = (text: string) => Buffer.from(text).toString("base64");
const storing = (name: string) => [{ name: "default", label: { en_US: name }, capabilities: {}, permissions: { storage: ["plugin"] } }];

beforeAll(async () => {
  host = await startTestHost();
});
afterAll(async () => {
  await host?.dispose();
});

describe("frozen snapshot vs. deletions mid-run", () => {
  it("a run still going when its runner service is deleted leaves no plugin storage behind (README: the plugin area is deleted with the service)", async () => {
    const svc = await startScriptedRunner({ name: "store-doomed", runners: storing("doomed") });
    try {
      await svc.register(host);
      await putAgent(host, { agent_id: "doomed", runner_id: svc.runnerId(), scope: { type: "conversation", id: "st-doomed" }, resource_policy: { allow: { storage: ["plugin"] } } });
      const serviceId = (await host.admin("GET", "/v1/admin/runners?limit=200")).body.items.find((r: { runner_id: string }) => r.runner_id === svc.runnerId()).service_id;
      const arrived = deferred();
      const release = deferred();
      const running = svc.run(host, "st-doomed", async (api) => {
        arrived.resolve();
        await release.promise;
        return (await api("storage.set", { area: "plugin", key: "notes", value_base64: b64("private notes") })).status;
      });
      await arrived.promise;
      expect((await host.admin("DELETE", "/v1/admin/agents/doomed?runs=leave")).status).toBe(200);
      expect((await host.admin("DELETE", `/v1/admin/runner-services/${serviceId}`)).status).toBe(204);
      release.resolve();
      const { result } = await running;
      // Whatever the call answered, nothing of the deleted service may be kept: nobody can ever read or delete it.
      const left = await host.query<{ key: string }>("SELECT key FROM storage WHERE area = 'plugin' AND owner_key = ?", [serviceId]);
      expect({ result, left: left.map((r) => r.key) }).toEqual({ result: 200, left: [] });
    } finally {
      await svc.close();
    }
  });
});
