import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestHost, type TestHost } from "../support/host";
import { putAgent, startScriptedRunner } from "../support/scripted-runner";

/** PROTOCOL §12: denials are audited in EventLog; a record stays small whatever a runner asked for (each field cut to 200 characters). */

let host: TestHost;
let runner: Awaited<ReturnType<typeof startScriptedRunner>>;

beforeAll(async () => {
  runner = await startScriptedRunner({ name: "denials", runners: [{ name: "default", label: { en_US: "d" }, capabilities: {}, permissions: { history: ["page"] } }] });
  host = await startTestHost();
  await runner.register(host);
  await putAgent(host, { agent_id: "denials", runner_id: runner.runnerId(), scope: { type: "global" } });
});
afterAll(async () => {
  await host?.dispose();
  await runner?.close();
});

describe("denial records stay small whatever was asked", () => {
  it("a history.page naming a huge conversation_id leaves an EventLog denial cut as the decision log cuts it (≤ 200 characters)", async () => {
    const huge = "c".repeat(1024 * 1024);
    const { result, runId } = await runner.run(host, "huge-id", async (api) => (await api("history.page", { conversation_id: huge })).status);
    expect(result).toBe(403);
    const rows = await host.query<{ data_json: string }>("SELECT data_json FROM event_log WHERE event_type = 'host_api.denied' AND run_id = ?", [runId]);
    expect(rows).toHaveLength(1);
    const denial = JSON.parse(rows[0].data_json);
    expect(denial.action).toBe("history.page");
    expect(denial.resource.conversation_id).toBe("c".repeat(200));
    expect(rows[0].data_json.length).toBeLessThan(4096);
  });
});
